package io.ticketing.client

import io.ticketing.client.internal.AcquireOp
import io.ticketing.client.internal.Blocking
import io.ticketing.client.internal.BrokerConfig
import io.ticketing.client.internal.BrokerCore
import io.ticketing.client.internal.HostPort
import io.ticketing.client.internal.Timings
import kotlinx.coroutines.future.await
import kotlinx.coroutines.suspendCancellableCoroutine
import java.time.Duration
import java.util.concurrent.CompletableFuture
import java.util.concurrent.Executor
import java.util.function.Consumer
import kotlin.coroutines.resume
import kotlin.coroutines.resumeWithException

/**
 * A client of a Ticketing server or cluster. Create one at start-up and share
 * it: it keeps its connections (two to a single address, one per address
 * otherwise) and reconnects them in the background.
 *
 * Three calling styles share the same connections: [acquire] (Kotlin
 * coroutines), [acquireAsync] (`CompletableFuture`) and [acquireBlocking]
 * (parks the calling thread only while waiting for the reply; fine on virtual
 * threads).
 *
 * Arguments: `wait` 0..255 s (0 = one immediate attempt, no queueing),
 * `lease` 1..250 s, `minWork` 0..lease (a ticket is handed out only if at
 * least that much of the lease surely remains). Sub-second values round up;
 * anything out of range fails with [TicketingException.InvalidArgument]
 * before anything is sent.
 */
class TicketBroker private constructor(private val core: BrokerCore) : AutoCloseable {

    /** Suspends until at least one connection is usable; [TicketingException.NoConnection] after [timeout]. */
    @JvmSynthetic
    suspend fun waitReady(timeout: Duration) {
        try {
            core.awaitReady(timeout).await()
        } catch (e: java.util.concurrent.CompletionException) {
            throw BrokerCore.unwrap(e)
        }
    }

    /** [waitReady], parking the calling thread. */
    fun waitReadyBlocking(timeout: Duration) {
        Blocking.await(core.awaitReady(timeout), onInterrupt = {})
    }

    /** [waitReady] as a future. */
    fun waitReadyAsync(timeout: Duration): CompletableFuture<Void?> = core.awaitReady(timeout).thenApply { null }

    /**
     * Acquires [key]. Cancelling the coroutine aborts the acquire: before the
     * request is written nothing is sent; after, the connection is half-closed
     * and a grant that still arrives is released by its exact token.
     *
     * @throws TicketingException see the error codes; a cancelled acquire throws CancellationException
     */
    @JvmSynthetic
    suspend fun acquire(key: String, wait: Duration, lease: Duration, minWork: Duration = Duration.ZERO): Ticket {
        val op = core.acquire(key, wait, lease, minWork)
        return suspendCancellableCoroutine { cont ->
            cont.invokeOnCancellation { cause -> op.abort(cause) }
            op.future.whenComplete { ticket, error ->
                if (error == null) {
                    // If the coroutine was cancelled meanwhile, nobody gets the ticket: release it.
                    cont.resume(ticket) { _, t, _ -> t.close() }
                } else {
                    cont.resumeWithException(BrokerCore.unwrap(error))
                }
            }
        }
    }

    /**
     * [acquire] as a future. `cancel()` on it (and completing it from outside,
     * e.g. `orTimeout`) aborts the acquire as described on [acquire].
     * Dependent stages without an executor run on the client's I/O thread:
     * do not block in them.
     */
    @JvmOverloads
    fun acquireAsync(key: String, wait: Duration, lease: Duration, minWork: Duration = Duration.ZERO): CompletableFuture<Ticket> =
        try {
            core.acquire(key, wait, lease, minWork).future
        } catch (e: TicketingException) {
            CompletableFuture.failedFuture(e)
        }

    /**
     * [acquire], parking the calling thread until the reply. Interrupting the
     * thread aborts the acquire (CancellationException, interrupt flag kept).
     */
    @JvmOverloads
    fun acquireBlocking(key: String, wait: Duration, lease: Duration, minWork: Duration = Duration.ZERO): Ticket {
        val op: AcquireOp = core.acquire(key, wait, lease, minWork)
        return Blocking.await(op.future, onInterrupt = { op.abort(null) })
    }

    /** How many connections are usable now (for tests). */
    internal val usableConnections: Int get() = core.pool.slots.count { it.current?.isReady == true }

    /** True after [close]. */
    val isClosed: Boolean get() = core.isClosed

    /**
     * Rejects pending acquires with [TicketingException.Closed], waits for
     * releases in flight (at most 5 s), then closes the connections. Tickets
     * still held are left to their leases. Later calls fail with Closed.
     */
    override fun close() = core.close()

    /** Options for [builder]. */
    class Builder internal constructor() {
        private var addrs: List<String> = emptyList()
        private var token: String? = null
        private var tls: TlsMode = TlsMode.Off
        private var executor: Executor? = null
        private var onError: Consumer<TicketingException>? = null
        private var timings = Timings()

        /** Server addresses, `host:port` (`[v6]:port`; port 5225 when left out). Required. */
        fun addrs(vararg addrs: String): Builder = apply { this.addrs = addrs.toList() }

        /** [addrs] from a list. */
        fun addrs(addrs: List<String>): Builder = apply { this.addrs = addrs.toList() }

        /** Client token sent in `H` (one of the server's `client_tokens`). Default: none. */
        fun token(token: String?): Builder = apply { this.token = token }

        /** TLS mode. Default: [TlsMode.Off]. */
        fun tls(mode: TlsMode): Builder = apply { this.tls = mode }

        /**
         * Where background work runs: the release behind [Ticket.close] reports
         * its outcome there. Default: a virtual-thread executor on JDK 21+, a
         * small daemon pool otherwise.
         */
        fun executor(executor: Executor): Builder = apply { this.executor = executor }

        /**
         * Receives failures of background work (a release started by
         * [Ticket.close], a compensating release). Default: logged as warnings
         * through `System.Logger` "io.ticketing.client".
         */
        fun onError(handler: Consumer<TicketingException>): Builder = apply { this.onError = handler }

        private var beforeWrite: (() -> Unit)? = null

        internal fun timings(timings: Timings): Builder = apply { this.timings = timings }

        internal fun beforeWrite(hook: () -> Unit): Builder = apply { this.beforeWrite = hook }

        /** Builds the broker and starts connecting in the background; see [waitReady]. */
        fun connect(): TicketBroker {
            if (addrs.isEmpty()) throw TicketingException.InvalidArgument("at least one address is required")
            val addresses = addrs.map { HostPort.parse(it) }
            token?.let { t ->
                if (t.isEmpty() || t.any { it.code <= 0x20 || it.code == 0x7f } || t.toByteArray().size > 500) {
                    throw TicketingException.InvalidArgument("a client token is 1..500 bytes without spaces or control characters")
                }
            }
            return TicketBroker(BrokerCore(BrokerConfig(addresses, token, tls, executor, onError, timings, beforeWrite)))
        }
    }

    companion object {
        /** A broker for one address (two connections to it), plain TCP, no client token. */
        @JvmStatic
        fun connect(addr: String): TicketBroker = builder().addrs(addr).connect()

        /** Options: several addresses, a client token, TLS, an executor. */
        @JvmStatic
        fun builder(): Builder = Builder()
    }
}
