package io.ticketing.client

import io.ticketing.client.internal.Blocking
import io.ticketing.client.internal.BrokerCore
import kotlinx.coroutines.Job
import kotlinx.coroutines.future.await
import java.time.Duration
import java.util.concurrent.CancellationException
import java.util.concurrent.CompletableFuture
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicReference
import java.util.concurrent.locks.ReentrantLock
import kotlin.concurrent.withLock

/**
 * A granted lock: its [key], its fencing [token], and how long it is surely
 * still held ([remaining]: conservative, counted from the moment the acquire
 * was written, not from the grant).
 *
 * Fence every protected write with [token] in the same transaction: reject
 * `token <= stored high-water mark`, store the token, write, commit; then release.
 *
 * [close] (try-with-resources / `use`) is a bounded, best-effort release in
 * the background; when the outcome matters, call [release] / [releaseBlocking]
 * / [releaseAsync] and look at the result.
 */
class Ticket internal constructor(
    private val broker: BrokerCore,
    /** The locked key. */
    val key: String,
    /**
     * The fencing token: an unsigned 64-bit number held in a `long`. Compare
     * tokens with `Long.compareUnsigned`; print with [tokenString].
     */
    val token: Long,
    private val leaseEndNanos: Long,
) : AutoCloseable {
    private val releasing = AtomicReference<CompletableFuture<ReleaseResult>?>()
    private val lock = ReentrantLock()
    private val ended = CompletableFuture<Void?>()

    /**
     * Active while the ticket may be used; cancelled at the conservative lease
     * end (cause [TicketingException.LeaseEnded]) or when the ticket is
     * released (cause [TicketingException.Released]), whichever comes first.
     * The Kotlin form of [leaseEnd]: `ticket.validity.invokeOnCompletion { ... }`,
     * or `ticket.validity.join()` in a coroutine that watches the lease.
     */
    val validity: Job = Job()

    init {
        val left = leaseEndNanos - System.nanoTime()
        // The JDK's shared delay thread, not the broker's timer: a held ticket
        // outlives its broker's close() and its lease end must still be signalled.
        CompletableFuture.delayedExecutor(maxOf(0L, left), TimeUnit.NANOSECONDS).execute { end(null) }
    }

    /**
     * Completes normally at the conservative lease end (from then on the
     * server may grant the key to someone else), or exceptionally with
     * [TicketingException.Released] if the ticket is released first. Each call
     * returns a new future; cancelling it changes nothing. Stages added
     * without an executor run on a shared JDK timer thread: do not block in them.
     */
    fun leaseEnd(): CompletableFuture<Void?> = ended.copy()

    /** Signals the end: at the lease end ([releasedFirst] null) or at the start of a release. */
    private fun end(releasedFirst: TicketingException.Released?) {
        val first = if (releasedFirst == null) ended.complete(null) else ended.completeExceptionally(releasedFirst)
        if (!first) return
        val cause = releasedFirst ?: TicketingException.LeaseEnded(key)
        validity.cancel(CancellationException(cause.message).apply { initCause(cause) })
    }

    /** [token] as an unsigned decimal string (exact, as on the wire). */
    val tokenString: String get() = java.lang.Long.toUnsignedString(token)

    /** Conservative time left on the lease; zero once it has ended. */
    fun remaining(): Duration = Duration.ofNanos(maxOf(0L, leaseEndNanos - System.nanoTime()))

    /** True once a release (explicit or by [close]) has started. */
    val isReleased: Boolean get() = releasing.get() != null

    /**
     * Throws [TicketingException.Released] if the ticket was released, or
     * [TicketingException.LeaseEnded] if its conservative lease end has passed.
     */
    fun checkValid() {
        if (isReleased) throw TicketingException.Released(key)
        if (leaseEndNanos - System.nanoTime() <= 0) throw TicketingException.LeaseEnded(key)
    }

    /**
     * Releases exactly this grant: [ReleaseResult.RELEASED] (`R`) or
     * [ReleaseResult.NOT_HELD] (`N`). Retried on other connections for an
     * absolute 5 s; no final reply by then fails with [TicketingException.ReleaseFailed].
     * Calling it again gives the first call's result.
     */
    @JvmSynthetic
    suspend fun release(): ReleaseResult = releaseAsync().await()

    /** [release] as a future (cancelling the returned future does not stop the release). */
    fun releaseAsync(): CompletableFuture<ReleaseResult> = startRelease().first.copy()

    /** [release], parking the calling thread until the result (at most about 5 s). */
    fun releaseBlocking(): ReleaseResult = Blocking.await(startRelease().first, onInterrupt = {})

    /**
     * Best-effort release in the background: started by a task on the broker's
     * executor (virtual threads by default on JDK 21+), bounded by the same
     * 5 s counted from this call; returns at once and never throws. A failure
     * goes to the broker's error handler, on that executor. Does nothing after
     * an explicit release.
     */
    override fun close() {
        val (f, started) = startRelease(inBackground = true)
        if (started) broker.reportFailureOf(f)
    }

    /**
     * The one release of this ticket (started now if not yet; by a task on the
     * broker's executor when [inBackground]), and whether this call started it.
     */
    private fun startRelease(inBackground: Boolean = false): Pair<CompletableFuture<ReleaseResult>, Boolean> {
        val started = lock.withLock {
            releasing.get()?.let { return it to false }
            val f = broker.release(key, token, if (inBackground) broker.executor else null)
            releasing.set(f)
            f
        }
        // Outside the lock: this runs the callers' lease-end callbacks.
        end(TicketingException.Released(key))
        return started to true
    }

    override fun toString() = "Ticket(key=$key, token=$tokenString, remaining=${remaining().toMillis()} ms)"
}
