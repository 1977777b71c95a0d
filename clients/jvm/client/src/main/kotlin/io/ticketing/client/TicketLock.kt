package io.ticketing.client

import java.time.Duration
import java.util.concurrent.CancellationException
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.TimeUnit
import java.util.concurrent.locks.Condition
import java.util.concurrent.locks.Lock

/**
 * A `java.util.concurrent.locks.Lock` over one key of a [TicketBroker], for
 * code (and frameworks) written against `Lock`: `lock()` / `tryLock()` /
 * `unlock()` acquire and release a [Ticket] with [lease] (kept alive by
 * extensions when [keepAlive], the default). Get one with [TicketBroker.lock].
 *
 * Like a `ReentrantLock` it is held by a thread: the thread that locked it
 * unlocks it, and may lock it again (a hold count; the ticket is released
 * when the count drops to zero). Other threads, here or in other processes,
 * wait in the server's FIFO queue. The fencing token of the current hold is
 * [token] ([ticket] for the whole ticket): fence every protected write with
 * it. A hold can end without [unlock] (the lease ran out, keep-alive failed):
 * watch [Ticket.leaseEnd] / [Ticket.validity], or call [Ticket.checkValid].
 *
 * Conditions are not supported. Outcomes that are not a plain yes or no
 * ([TicketingException.Indeterminate], [TicketingException.NoConnection], ...)
 * are thrown as they are by [TicketBroker.acquireBlocking].
 */
class TicketLock internal constructor(
    private val broker: TicketBroker,
    /** The key this lock stands for. */
    val key: String,
    /** The lease of each hold. */
    val lease: Duration,
    /** Whether each hold is kept alive by extensions (see [TicketBroker.acquire]). */
    val keepAlive: Boolean,
) : Lock {
    private class Hold(val ticket: Ticket, var count: Int)

    private val holds = ConcurrentHashMap<Thread, Hold>()

    /** The ticket the current thread holds, or null. */
    fun ticket(): Ticket? = holds[Thread.currentThread()]?.ticket

    /** The fencing token of the current thread's hold; IllegalMonitorStateException if it holds none. */
    val token: Long get() = ticket()?.token ?: throw IllegalMonitorStateException("the current thread does not hold $key")

    /** True if some thread of this process holds this lock. */
    val isHeldByAnyThread: Boolean get() = holds.isNotEmpty()

    /** True if the current thread holds this lock and its lease has not ended. */
    val isHeldByCurrentThread: Boolean get() = ticket()?.let { !it.remaining().isZero } ?: false

    /** Waits as long as it takes (in waits of at most 255 s); an interrupt is remembered and set again after. */
    override fun lock() {
        var interrupted = false
        while (true) {
            try {
                if (tryAcquire(MAX_WAIT)) break
            } catch (_: InterruptedException) {
                interrupted = true
            }
        }
        if (interrupted) Thread.currentThread().interrupt()
    }

    override fun lockInterruptibly() {
        if (Thread.interrupted()) throw InterruptedException()
        while (!tryAcquire(MAX_WAIT)) {
            if (Thread.interrupted()) throw InterruptedException()
        }
    }

    /** One immediate attempt (wait 0: no queueing). */
    override fun tryLock(): Boolean = try {
        tryAcquire(Duration.ZERO)
    } catch (_: InterruptedException) {
        Thread.currentThread().interrupt()
        false
    }

    /**
     * Waits at most [time]: the server's waits are whole seconds, so it is
     * rounded down (never longer than asked; under 1 s is one immediate attempt).
     */
    override fun tryLock(time: Long, unit: TimeUnit): Boolean {
        if (Thread.interrupted()) throw InterruptedException()
        var left = Duration.ofNanos(unit.toNanos(maxOf(0L, time)))
        while (true) {
            val step = if (left > MAX_WAIT) MAX_WAIT else Duration.ofSeconds(left.seconds)
            val start = System.nanoTime()
            if (tryAcquire(step)) return true
            left = left.minusNanos(System.nanoTime() - start)
            if (left.seconds < 1) return false
        }
    }

    /**
     * Ends the current thread's hold (or one level of it): the ticket is
     * released and the outcome awaited (at most about 5 s). A release that
     * cannot be confirmed throws [TicketingException.ReleaseFailed] (the key
     * stays held until its lease ends); a ticket whose lease had already ended
     * is not an error.
     */
    override fun unlock() {
        val me = Thread.currentThread()
        val hold = holds[me] ?: throw IllegalMonitorStateException("the current thread does not hold $key")
        if (--hold.count > 0) return
        holds.remove(me)
        hold.ticket.releaseBlocking()
    }

    override fun newCondition(): Condition = throw UnsupportedOperationException("a TicketLock has no conditions")

    private fun tryAcquire(wait: Duration): Boolean {
        val me = Thread.currentThread()
        holds[me]?.let { hold ->
            if (!hold.ticket.remaining().isZero) {
                hold.count++
                return true
            }
            holds.remove(me) // the lease ended under us: this is a new hold
        }
        val ticket = try {
            broker.acquireBlocking(key, wait, lease, Duration.ZERO, keepAlive)
        } catch (_: TicketingException.Timeout) {
            return false
        } catch (e: CancellationException) {
            throw InterruptedException("interrupted while waiting for $key").apply { initCause(e) }
        }
        holds[me] = Hold(ticket, 1)
        return true
    }

    override fun toString() = "TicketLock($key, ${if (ticket() != null) "held by this thread" else "not held by this thread"})"

    private companion object {
        val MAX_WAIT: Duration = Duration.ofSeconds(255)
    }
}
