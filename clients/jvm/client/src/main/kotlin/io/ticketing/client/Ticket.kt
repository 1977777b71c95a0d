package io.ticketing.client

import io.ticketing.client.internal.Blocking
import io.ticketing.client.internal.BrokerCore
import kotlinx.coroutines.Job
import io.ticketing.client.internal.ExtendOutcome
import io.ticketing.client.internal.LeaseTimer
import kotlinx.coroutines.future.await
import java.time.Duration
import java.util.concurrent.CancellationException
import java.util.concurrent.CompletableFuture
import java.util.concurrent.ScheduledFuture
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
    leaseEndNanos: Long,
    /** The lease last granted or extended by, in whole seconds: what keep-alive extends by. Guarded by [lock]. */
    private var leaseSeconds: Int,
    keepAliveFromNanos: Long?,
) : AutoCloseable {
    private val releasing = AtomicReference<CompletableFuture<ReleaseResult>?>()
    private val lock = ReentrantLock()
    private val ended = CompletableFuture<Void?>()

    /** The conservative lease end (monotonic); moved by each extension. Guarded by [lock]. */
    @Volatile private var leaseEndNanos = leaseEndNanos
    private var leaseEndTask: ScheduledFuture<*>? = null
    private var keepAliveTask: ScheduledFuture<*>? = null

    /** Extends by itself at a third of the lease (the acquire's `keepAlive`). */
    private val keepAliveOn = keepAliveFromNanos != null

    /**
     * Active while the ticket may be used; cancelled at the conservative lease
     * end (cause [TicketingException.LeaseEnded]) or when the ticket is
     * released (cause [TicketingException.Released]), whichever comes first.
     * The Kotlin form of [leaseEnd]: `ticket.validity.invokeOnCompletion { ... }`,
     * or `ticket.validity.join()` in a coroutine that watches the lease.
     */
    val validity: Job = Job()

    init {
        lock.withLock {
            armLeaseEndLocked()
            if (keepAliveFromNanos != null) scheduleKeepAliveLocked(keepAliveFromNanos)
        }
    }

    /**
     * The lease-end signal, on the library's shared lease timer, not the
     * broker's: a held ticket outlives its broker's close() and its lease end
     * must still be signalled. Cancelled by a release, moved by an extension.
     */
    private fun armLeaseEndLocked() {
        leaseEndTask?.cancel(false)
        leaseEndTask = LeaseTimer.at(leaseEndNanos) { broker.env.gate(); end(null) }
    }

    /**
     * Completes normally at the conservative lease end (from then on the
     * server may grant the key to someone else), or exceptionally with
     * [TicketingException.Released] if the ticket is released first. Each call
     * returns a new future; cancelling it changes nothing. Stages added
     * without an executor run on the JDK's common pool: do not block in them.
     */
    fun leaseEnd(): CompletableFuture<Void?> = ended.copy()

    /** Signals the end: at the lease end ([releasedFirst] null) or at the start of a release. */
    private fun end(releasedFirst: TicketingException.Released?) {
        lock.withLock {
            if (releasedFirst == null && leaseEndNanos - System.nanoTime() > 0 && !ended.isDone) {
                armLeaseEndLocked() // an extension moved the end after this task was due
                return
            }
            leaseEndTask?.cancel(false)
            keepAliveTask?.cancel(false)
            leaseEndTask = null
            keepAliveTask = null
        }
        val first = if (releasedFirst == null) ended.complete(null) else ended.completeExceptionally(releasedFirst)
        if (!first) return
        val cause = releasedFirst ?: TicketingException.LeaseEnded(key)
        validity.cancel(CancellationException(cause.message).apply { initCause(cause) })
    }

    /** The grant is gone (`G`): the lease has ended as far as this ticket is concerned. */
    private fun gone() {
        lock.withLock { leaseEndNanos = System.nanoTime() }
        end(null)
    }

    /** [token] as an unsigned decimal string (exact, as on the wire). */
    val tokenString: String get() = java.lang.Long.toUnsignedString(token)

    /** Conservative time left on the lease; zero once it has ended. */
    fun remaining(): Duration = if (ended.isDone) Duration.ZERO else Duration.ofNanos(maxOf(0L, leaseEndNanos - System.nanoTime()))

    /** True once a release (explicit or by [close]) has started. */
    val isReleased: Boolean get() = releasing.get() != null

    /**
     * Throws [TicketingException.Released] if the ticket was released, or
     * [TicketingException.LeaseEnded] if its conservative lease end has passed.
     */
    fun checkValid() {
        if (isReleased) throw TicketingException.Released(key)
        if (remaining().isZero) throw TicketingException.LeaseEnded(key)
    }

    /**
     * Extends this grant: `X key token lease` (the lease rounded up to whole
     * seconds, 1..250 s; it may also shorten it). The token does not change.
     * Re-sent on another connection like a release, until 5 s after the call
     * or the conservative lease end, whichever is first. Returns the new
     * conservative remaining time, counted from the moment the answered `X`
     * was written (never from the reply); [leaseEnd] and [validity] move with
     * it. Fails with [TicketingException.LeaseEnded] when the grant is gone
     * (the server answered `G`: it expired, was released or force-released)
     * or the conservative lease end has passed, then the lease-end signal
     * fires; [TicketingException.Released] after a release;
     * [TicketingException.Indeterminate] when no reply came in time (the
     * ticket keeps its old lease end); [TicketingException.InvalidArgument]
     * for a lease out of range.
     */
    @JvmSynthetic
    suspend fun extend(lease: Duration): Duration = extendAsync(lease).await()

    /** [extend] as a future. */
    fun extendAsync(lease: Duration): CompletableFuture<Duration> {
        val seconds = try {
            broker.leaseSeconds(lease)
        } catch (e: TicketingException) {
            return CompletableFuture.failedFuture(e)
        }
        return extendSeconds(seconds)
    }

    /** [extend], parking the calling thread until the outcome (at most about 5 s). */
    fun extendBlocking(lease: Duration): Duration = Blocking.await(extendAsync(lease), onInterrupt = { true })

    /** Extensions run one at a time, in call order: each starts when the one before has its outcome. */
    private var lastExtension: CompletableFuture<*> = CompletableFuture.completedFuture(null)

    private fun extendSeconds(seconds: Int): CompletableFuture<Duration> = lock.withLock {
        val next = lastExtension.handle { _, _ -> }.thenCompose { extendNow(seconds) }
        lastExtension = next
        next
    }

    private fun extendNow(seconds: Int): CompletableFuture<Duration> {
        if (isReleased) return CompletableFuture.failedFuture(TicketingException.Released(key))
        val now = System.nanoTime()
        if (ended.isDone || lock.withLock { leaseEndNanos } - now <= 0) {
            // Past the end (perhaps paused, before the lease-end task could run): over now, and nothing is sent.
            end(null)
            return CompletableFuture.failedFuture(TicketingException.LeaseEnded(key))
        }
        val endNanos = lock.withLock {
            // While the X is unanswered, a shortening one may already be applied: count the earlier end.
            val shortened = now + broker.conservativeNanos(seconds)
            if (shortened - leaseEndNanos < 0) {
                leaseEndNanos = shortened
                armLeaseEndLocked()
            }
            leaseEndNanos
        }
        val window = now + broker.env.timings.releaseWindowMillis * 1_000_000L
        val boundedByLease = endNanos - window < 0
        val op = try {
            broker.extend(key, token, seconds, if (boundedByLease) endNanos else window)
        } catch (e: TicketingException) {
            return CompletableFuture.failedFuture(e)
        }
        return op.handle { outcome, error ->
            if (isReleased) throw TicketingException.Released(key)
            when {
                outcome is ExtendOutcome.Extended -> {
                    val newEnd = outcome.writeNanos + broker.conservativeNanos(seconds)
                    lock.withLock {
                        if (!ended.isDone && !isReleased) {
                            leaseEndNanos = newEnd
                            leaseSeconds = seconds
                            armLeaseEndLocked()
                            if (keepAliveOn) scheduleKeepAliveLocked(outcome.writeNanos)
                        }
                    }
                    remaining().takeUnless { it.isZero } ?: run {
                        end(null)
                        throw TicketingException.LeaseEnded(key)
                    }
                }
                outcome is ExtendOutcome.Gone -> {
                    gone()
                    throw TicketingException.LeaseEnded(key)
                }
                else -> {
                    val e = BrokerCore.unwrap(error!!)
                    // The lease ended before any reply: what is left is a lease that has ended.
                    val timedOut = e is TicketingException.Indeterminate || e is TicketingException.NoConnection
                    if (remaining().isZero || (boundedByLease && timedOut)) {
                        end(null)
                        throw TicketingException.LeaseEnded(key)
                    }
                    throw e
                }
            }
        }
    }

    /**
     * Keep-alive: extends by the current lease once a third of the lease that
     * began at [startNanos] (the acquire's write, then each answered `X`'s
     * write, by hand or by the keep-alive) has passed, with the rules of
     * [extend]. When it cannot extend in time the lease-end signal fires at
     * the conservative end, as without it.
     */
    private fun scheduleKeepAliveLocked(startNanos: Long) {
        keepAliveTask?.cancel(false)
        keepAliveTask = null
        if (ended.isDone || isReleased) return
        keepAliveTask = LeaseTimer.at(startNanos + leaseSeconds * 1_000_000_000L / 3) { broker.env.gate(); keepAlive() }
    }

    /** An answered extension schedules the next one (extendNow). */
    private fun keepAlive() {
        extendSeconds(lock.withLock { leaseSeconds }).whenComplete { _, error ->
            when (error?.let { BrokerCore.unwrap(it) }) {
                // No final reply in its window (none came, or nothing could be sent): again at once while the lease runs.
                is TicketingException.Indeterminate, is TicketingException.NoConnection -> if (!ended.isDone && !isReleased) keepAlive()
                // Extended (the next is scheduled), or over: lease ended, released, closed, refused. The ticket says so.
                else -> Unit
            }
        }
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
    fun releaseBlocking(): ReleaseResult = Blocking.await(startRelease().first, onInterrupt = { true })

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
        // Outside the lock: this runs the callers' lease-end callbacks (and cancels the lease timers).
        end(TicketingException.Released(key))
        return started to true
    }

    override fun toString() = "Ticket(key=$key, token=$tokenString, remaining=${remaining().toMillis()} ms)"
}
