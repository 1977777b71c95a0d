package io.ticketing.client

import io.ticketing.client.internal.AcquireOp
import io.ticketing.client.internal.Blocking
import io.ticketing.client.internal.BrokerConfig
import io.ticketing.client.internal.BrokerCore
import io.ticketing.client.internal.HostPort
import io.ticketing.client.internal.Timings
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.ensureActive
import kotlinx.coroutines.future.await
import kotlinx.coroutines.suspendCancellableCoroutine
import kotlinx.coroutines.withContext
import kotlinx.coroutines.yield
import java.time.Duration
import java.util.concurrent.CompletableFuture
import java.util.concurrent.CompletionStage
import java.util.concurrent.Executor
import java.util.function.Consumer
import java.util.function.Function
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
 * `lease` 1..250 s, `minWork` 0 up to the rounded lease, inclusive (a
 * ticket is handed out only if at least that much of the lease surely
 * remains; a budget equal to the lease is sent but can never be met, so it
 * ends in [TicketingException.InsufficientLease]). Sub-second values round up;
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
        Blocking.await(core.awaitReady(timeout), onInterrupt = { true })
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
    suspend fun acquire(key: String, wait: Duration, lease: Duration, minWork: Duration = Duration.ZERO, keepAlive: Boolean = false): Ticket {
        // A coroutine cancelled before the call starts nothing: not even an `A` that is
        // withdrawn again (which could race the writer and cost a half-close).
        currentCoroutineContext().ensureActive()
        // Let the caller's step finish before anything is queued: a coroutine started
        // with launch(start = UNDISPATCHED) and cancelled right after sends nothing
        // (the TypeScript client likewise never writes in the same tick as the call).
        yield()
        val op = core.acquire(key, wait, lease, minWork, keepAlive)
        return suspendCancellableCoroutine { cont ->
            cont.invokeOnCancellation { cause -> op.abort(cause) }
            op.future.whenComplete { ticket, error ->
                if (error == null) {
                    // If the coroutine was cancelled meanwhile, nobody gets the ticket: release it.
                    @OptIn(kotlinx.coroutines.ExperimentalCoroutinesApi::class)
                    cont.resume(ticket) { ticket.close() }
                } else {
                    cont.resumeWithException(BrokerCore.unwrap(error))
                }
            }
        }
    }

    /**
     * [acquire] as a future. `cancel()` on it (and completing it exceptionally
     * from outside, e.g. `orTimeout`) aborts the acquire as described on
     * [acquire]. Completing it with a value from outside (`complete`,
     * `completeAsync`, `completeOnTimeout`, `obtrude*`) throws
     * UnsupportedOperationException: only the client hands out tickets.
     * The future is completed on the broker's executor (never on a
     * connection's thread), so dependent stages without an executor run there.
     * [keepAlive]: the ticket extends itself (see [Ticket.extend]).
     */
    @JvmOverloads
    fun acquireAsync(
        key: String,
        wait: Duration,
        lease: Duration,
        minWork: Duration = Duration.ZERO,
        keepAlive: Boolean = false,
    ): CompletableFuture<Ticket> =
        try {
            core.acquire(key, wait, lease, minWork, keepAlive).future
        } catch (e: TicketingException) {
            CompletableFuture.failedFuture(e)
        }

    /**
     * [acquire], parking the calling thread until the reply. Interrupting the
     * thread aborts the acquire (CancellationException, interrupt flag kept).
     */
    @JvmOverloads
    fun acquireBlocking(key: String, wait: Duration, lease: Duration, minWork: Duration = Duration.ZERO, keepAlive: Boolean = false): Ticket {
        val op: AcquireOp = core.acquire(key, wait, lease, minWork, keepAlive)
        return Blocking.await(op.future, onInterrupt = { op.abort(null) })
    }

    /**
     * Releases [token] of [key] (a token kept from an earlier [Ticket], e.g.
     * across a restart or handed to another component): the same exact-token
     * release as [Ticket.release], with the same 5 s window, retries and
     * results. [ReleaseResult.NOT_HELD] if that token is not current.
     */
    @JvmSynthetic
    suspend fun release(key: String, token: Long): ReleaseResult = releaseAsync(key, token).await()

    /** [release] as a future. A bad key or a token of 0 fails it with InvalidArgument; nothing is sent. */
    fun releaseAsync(key: String, token: Long): CompletableFuture<ReleaseResult> =
        try {
            core.releaseByToken(key, token).copy()
        } catch (e: TicketingException) {
            CompletableFuture.failedFuture(e)
        }

    /** [release], parking the calling thread until the result (at most about 5 s). */
    fun releaseBlocking(key: String, token: Long): ReleaseResult = Blocking.await(core.releaseByToken(key, token), onInterrupt = { true })

    /**
     * Acquires [key], runs [block] with the ticket, and releases it however
     * [block] ends (returns, throws, or is cancelled). The release is awaited
     * (bounded by its 5 s window) and never throws: a failure goes to the
     * error handler (see [Builder.onError]); the lock is then held until its
     * lease ends. Errors of the acquire are thrown as by [acquire]; nothing
     * is retried. [block] is not stopped at the lease end: watch
     * [Ticket.validity] or call [Ticket.checkValid], and fence every write.
     */
    @JvmSynthetic
    suspend fun <T> withLock(
        key: String,
        wait: Duration,
        lease: Duration,
        minWork: Duration = Duration.ZERO,
        keepAlive: Boolean = false,
        block: suspend (Ticket) -> T,
    ): T {
        val ticket = acquire(key, wait, lease, minWork, keepAlive)
        try {
            return block(ticket)
        } finally {
            withContext(NonCancellable) { releaseQuietly(ticket).await() }
        }
    }

    /** [withLock] for Java (blocking): `broker.withLockBlocking(key, wait, lease, minWork, ticket -> ...)`. */
    fun <T> withLockBlocking(key: String, wait: Duration, lease: Duration, minWork: Duration, keepAlive: Boolean, body: Function<Ticket, T>): T {
        val ticket = acquireBlocking(key, wait, lease, minWork, keepAlive)
        try {
            return body.apply(ticket)
        } finally {
            Blocking.await(releaseQuietly(ticket), onInterrupt = { false })
        }
    }

    /** [withLockBlocking] without keep-alive. */
    fun <T> withLockBlocking(key: String, wait: Duration, lease: Duration, minWork: Duration, body: Function<Ticket, T>): T =
        withLockBlocking(key, wait, lease, minWork, false, body)

    /** [withLockBlocking] with no minimum-work budget. */
    fun <T> withLockBlocking(key: String, wait: Duration, lease: Duration, body: Function<Ticket, T>): T =
        withLockBlocking(key, wait, lease, Duration.ZERO, body)

    /**
     * [withLock] for Java async code: [body] returns a stage; the ticket is
     * released when it completes (either way), and the returned future
     * completes after that release with [body]'s outcome.
     */
    fun <T> withLockAsync(
        key: String,
        wait: Duration,
        lease: Duration,
        minWork: Duration,
        body: Function<Ticket, out CompletionStage<T>>,
    ): CompletableFuture<T> = withLockAsync(key, wait, lease, minWork, false, body)

    /** [withLockAsync] with [keepAlive] (see [acquire]). */
    fun <T> withLockAsync(
        key: String,
        wait: Duration,
        lease: Duration,
        minWork: Duration,
        keepAlive: Boolean,
        body: Function<Ticket, out CompletionStage<T>>,
    ): CompletableFuture<T> =
        acquireAsync(key, wait, lease, minWork, keepAlive).thenCompose { ticket ->
            val work: CompletionStage<T> = try {
                body.apply(ticket) ?: CompletableFuture.failedFuture(NullPointerException("the withLockAsync body returned null"))
            } catch (t: Throwable) {
                CompletableFuture.failedFuture(t)
            }
            work.handle { value, error -> value to error }.thenCompose { outcome ->
                releaseQuietly(ticket).thenApply {
                    outcome.second?.let { throw (it as? java.util.concurrent.CompletionException ?: java.util.concurrent.CompletionException(it)) }
                    outcome.first
                }
            }
        }

    /** Releases [ticket]; completes (never exceptionally) once the outcome is known, a failure reported. */
    private fun releaseQuietly(ticket: Ticket): CompletableFuture<Unit> =
        ticket.releaseAsync().handle { _, error ->
            if (error != null) core.reportError(error)
        }

    /**
     * A `java.util.concurrent.locks.Lock` for [key]: each hold is a ticket with
     * [lease], kept alive by extensions while held unless [keepAlive] is false.
     * See [TicketLock].
     */
    @JvmOverloads
    fun lock(key: String, lease: Duration, keepAlive: Boolean = true): TicketLock {
        io.ticketing.client.wire.Keys.problem(key)?.let { throw TicketingException.InvalidArgument(it) }
        core.leaseSeconds(lease)
        return TicketLock(this, key, lease, keepAlive)
    }

    /** A snapshot of the connections: one entry per slot, its state, node and last error. */
    val state: BrokerState get() = core.state()

    /** How many connections are usable now (for tests). */
    internal val usableConnections: Int get() = core.pool.slots.count { it.current?.isReady == true }

    /** True after [close]. */
    val isClosed: Boolean get() = core.isClosed

    /**
     * Rejects pending acquires and [waitReady] calls with
     * [TicketingException.Closed] at once, waits for releases in flight
     * (including the compensating releases of grants that still arrive for
     * the acquires it aborted), at most 5 s in all, then closes the
     * connections. Tickets still held are left to their leases. Later calls
     * fail with Closed; calling it again waits for the first close.
     */
    override fun close() = core.close()

    /** [close] as a future, completing when the broker is closed (at most about 5 s). */
    fun closeAsync(): CompletableFuture<Void?> = core.closeAsync()

    /** [close], suspending instead of parking the thread (Kotlin). */
    @JvmSynthetic
    suspend fun closeSuspending() {
        core.closeAsync().await()
    }

    /** Options for [builder]. */
    class Builder internal constructor() {
        private var addrs: List<String> = emptyList()
        private var token: String? = null
        private var tls: TlsMode = TlsMode.Off
        private var executor: Executor? = null
        private var onError: Consumer<TicketingException>? = null
        private var timings = Timings()

        /**
         * Server addresses, `host:port` (`[v6]:port`; port 5225 when left out), or one
         * connection URL (see [url]). Required.
         */
        fun addrs(vararg addrs: String): Builder = apply { this.addrs = addrs.toList() }

        private var urlToken: String? = null
        private var urlTls: TlsMode? = null

        /**
         * A connection URL: `ticketing://TOKEN@host:port,host:port?tls=system`. The
         * token is percent-encoded and optional; `tls=off|system|insecure`, or
         * `ca=PATH` for [TlsMode.Ca]. Sets the addresses, and the token and TLS mode
         * it names; a token or TLS mode also set on the builder must agree.
         */
        fun url(url: String): Builder = apply {
            val parsed = io.ticketing.client.internal.ConnectionUrl.parse(url)
            this.addrs = parsed.addresses
            urlToken = parsed.token
            urlTls = parsed.tls
        }

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
        private var onConnectionEvent: Consumer<ConnectionEvent>? = null

        /**
         * Receives [ConnectionEvent]s (connected, disconnected, redirected),
         * one at a time and in order, on the [executor]. Default: none.
         */
        fun onConnectionEvent(listener: Consumer<ConnectionEvent>): Builder = apply { this.onConnectionEvent = listener }

        internal fun timings(timings: Timings): Builder = apply { this.timings = timings }

        internal fun beforeWrite(hook: () -> Unit): Builder = apply { this.beforeWrite = hook }

        private var pauseGate: java.util.concurrent.locks.ReadWriteLock? = null

        internal fun pauseGate(gate: java.util.concurrent.locks.ReadWriteLock): Builder = apply { this.pauseGate = gate }

        /** Builds the broker and starts connecting in the background; see [waitReady]. */
        fun connect(): TicketBroker {
            if (addrs.size == 1 && io.ticketing.client.internal.ConnectionUrl.isUrl(addrs[0])) url(addrs[0])
            urlToken?.let { t ->
                if (token != null && token != t) throw TicketingException.InvalidArgument("the URL's token and token(...) differ")
                token = t
            }
            urlTls?.let { m ->
                if (tls != TlsMode.Off && tls != m) throw TicketingException.InvalidArgument("the URL's TLS mode ($m) and tls(...) ($tls) differ")
                tls = m
            }
            if (addrs.isEmpty()) throw TicketingException.InvalidArgument("at least one address is required")
            val addresses = addrs.map { HostPort.parse(it) }
            token?.let { t ->
                if (t.isEmpty() || t.any { it.code <= 0x20 || it.code == 0x7f } || t.toByteArray().size > 500) {
                    throw TicketingException.InvalidArgument("a client token is 1..500 bytes without spaces or control characters")
                }
            }
            return TicketBroker(BrokerCore(BrokerConfig(addresses, token, tls, executor, onError, timings, beforeWrite, onConnectionEvent, pauseGate)))
        }
    }

    companion object {
        /**
         * A broker for one address (two connections to it), plain TCP, no client
         * token; or for a connection URL, `ticketing://TOKEN@host:port,host:port?tls=system`
         * (see [Builder.url]).
         */
        @JvmStatic
        fun connect(addr: String): TicketBroker = builder().addrs(addr).connect()

        /** Options: several addresses, a client token, TLS, an executor. */
        @JvmStatic
        fun builder(): Builder = Builder()
    }
}
