package io.ticketing.client.internal

import io.ticketing.client.ReleaseResult
import io.ticketing.client.TicketingException
import io.ticketing.client.wire.Reply
import io.ticketing.client.wire.Request
import java.util.concurrent.CompletableFuture
import java.util.concurrent.locks.ReentrantLock
import kotlin.concurrent.withLock

/**
 * Releases one exact token: `R key token`, re-sent on another usable
 * connection whenever the one it went on fails (every 200 ms while none is
 * usable), until an absolute 5 s after it started. `R` = released, `N` = not
 * held; no final reply by then is [TicketingException.ReleaseFailed], never
 * assumed success.
 */
internal class ReleaseOp(
    private val broker: BrokerCore,
    val key: String,
    val token: Long,
) {
    val future = CompletableFuture<ReleaseResult>()
    private val lock = ReentrantLock()
    private var done = false
    private var current: Req? = null
    private var lastFailure: Throwable? = null
    private val timings get() = broker.env.timings

    /** The window is absolute from creation (the call, or the enqueue of a background release). */
    private val deadlineNanos = System.nanoTime() + timings.releaseWindowMillis * 1_000_000L

    private inner class Req(val conn: Connection) : Outgoing(Request.Release(key, token)) {
        override fun onReply(conn: Connection, reply: Reply) = onReplyFor(this, reply)
        override fun onConnectionLost(conn: Connection, sent: Boolean, dropped: Boolean, cause: Throwable) =
            onLost(this, cause)
    }

    fun start() {
        val left = maxOf(0L, (deadlineNanos - System.nanoTime()) / 1_000_000L)
        if (!broker.env.schedule(left, ::expire)) {
            fail("the broker is closed", TicketingException.Closed())
            return
        }
        attempt(null)
    }

    private fun attempt(exclude: Connection?) {
        val closed = lock.withLock {
            if (done) return
            if (broker.pool.isClosed) {
                true
            } else {
                for (c in broker.pool.usable()) {
                    if (c === exclude) continue
                    val r = Req(c)
                    if (c.enqueue(r)) {
                        current = r
                        return
                    }
                }
                current = null
                !broker.env.schedule(timings.releaseRetryMillis) { attempt(null) }
            }
        }
        if (closed) fail("the broker is closed", TicketingException.Closed())
    }

    private fun onReplyFor(req: Req, reply: Reply) {
        val result = when (reply) {
            is Reply.Released -> ReleaseResult.RELEASED
            is Reply.NotHeld -> ReleaseResult.NOT_HELD
            else -> return
        }
        lock.withLock {
            if (done) return
            done = true
            current = null
        }
        broker.env.debug { "release of $key via ${req.conn.address}: $result" }
        future.complete(result)
    }

    private fun onLost(req: Req, cause: Throwable) {
        lock.withLock {
            if (done || req !== current) return
            current = null
            lastFailure = cause
        }
        attempt(req.conn)
    }

    private fun expire() {
        val (cause, waitingForReply) = lock.withLock { lastFailure to (current != null) }
        fail(
            if (waitingForReply) {
                "no reply within ${timings.releaseWindowMillis} ms"
            } else {
                "no usable connection within ${timings.releaseWindowMillis} ms"
            },
            cause,
        )
    }

    private fun fail(message: String, cause: Throwable?) {
        lock.withLock {
            if (done) return
            done = true
        }
        future.completeExceptionally(TicketingException.ReleaseFailed(key, token, message, cause))
    }
}
