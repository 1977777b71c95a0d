package io.ticketing.client.internal

import io.ticketing.client.ReleaseResult
import io.ticketing.client.TicketingException
import io.ticketing.client.wire.Reply
import io.ticketing.client.wire.Request
import java.util.concurrent.CompletableFuture
import java.util.concurrent.locks.ReentrantLock
import kotlin.concurrent.withLock

/**
 * Releases one exact token: `R key token`, until an absolute 5 s after it
 * started. `R` = released, `N` = not held; no final reply by then is
 * [TicketingException.ReleaseFailed], never assumed success.
 *
 * It does not stay stuck on one connection: when the connection it went on
 * fails, it is re-sent on another usable one (every 200 ms while none is
 * usable); and when that connection merely stays silent for 500 ms, the same
 * `R` also goes out on another usable connection. Sending one exact-token
 * release twice is harmless: the second one is answered `N`, and the first
 * final reply (from whichever connection) is the outcome.
 */
internal class ReleaseOp(
    private val broker: BrokerCore,
    val key: String,
    val token: Long,
) {
    val future = CompletableFuture<ReleaseResult>()
    private val lock = ReentrantLock()
    private var done = false

    /** The copies of the `R` still waiting for a reply, one per connection. */
    private val inFlight = ArrayList<Req>()
    private var lastFailure: Throwable? = null
    private var retryScheduled = false
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
        attempt()
    }

    /**
     * Sends the `R` on one usable connection that does not carry a copy yet.
     * With none in flight and none usable, tries again in 200 ms.
     */
    private fun attempt() {
        val closed = lock.withLock {
            if (done) return
            if (broker.pool.isClosed) {
                true
            } else {
                for (c in broker.pool.usable()) {
                    if (inFlight.any { it.conn === c }) continue
                    val r = Req(c)
                    if (c.enqueue(r)) {
                        inFlight.add(r)
                        broker.env.schedule(timings.releaseHedgeMillis) { hedge(r) }
                        return
                    }
                }
                if (inFlight.isEmpty() && !retryScheduled) {
                    retryScheduled = true
                    !broker.env.schedule(timings.releaseRetryMillis) {
                        lock.withLock { retryScheduled = false }
                        attempt()
                    }
                } else {
                    false
                }
            }
        }
        if (closed) fail("the broker is closed", TicketingException.Closed())
    }

    /** [req] has had no reply for the hedge delay: send a copy on another connection too. */
    private fun hedge(req: Req) {
        lock.withLock { if (done || req !in inFlight) return }
        broker.env.debug { "release of $key: no reply from ${req.conn.address} yet; also sending it elsewhere" }
        attempt()
        // Still silent later: a connection that became usable meanwhile gets a copy too.
        broker.env.schedule(timings.releaseHedgeMillis) { hedge(req) }
    }

    private fun onReplyFor(req: Req, reply: Reply) {
        val result = when (reply) {
            is Reply.Released -> ReleaseResult.RELEASED
            is Reply.NotHeld -> ReleaseResult.NOT_HELD
            else -> return
        }
        lock.withLock {
            inFlight.remove(req)
            if (done) return
            done = true
        }
        broker.env.debug { "release of $key via ${req.conn.address}: $result" }
        future.complete(result)
    }

    private fun onLost(req: Req, cause: Throwable) {
        lock.withLock {
            if (!inFlight.remove(req) || done) return
            lastFailure = cause
            if (cause is TicketingException.Permission) done = true
        }
        // E perm answering this release: no connection will accept this key.
        if (cause is TicketingException.Permission) {
            future.completeExceptionally(TicketingException.Permission("${cause.message} (release of $key)"))
            return
        }
        attempt()
    }

    private fun expire() {
        val (cause, waitingForReply) = lock.withLock { lastFailure to inFlight.isNotEmpty() }
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
