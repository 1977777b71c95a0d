package io.ticketing.client.internal

import io.ticketing.client.ReleaseResult
import io.ticketing.client.TicketingException
import io.ticketing.client.wire.Reply
import io.ticketing.client.wire.Request
import java.util.concurrent.CompletableFuture
import java.util.concurrent.locks.ReentrantLock
import kotlin.concurrent.withLock

/**
 * A request about one exact grant that is safe to send more than once (a
 * release `R`, an extension `X`), retried until [deadlineNanos]: the first
 * final reply, from whichever connection, is the outcome.
 *
 * It does not stay stuck on one connection: when the connection it went on
 * fails, it is re-sent on another usable one (every 200 ms while none is
 * usable); and when that connection merely stays silent for 500 ms, the same
 * line also goes out on another usable connection. Sending it twice is
 * harmless: a second `R` is answered `N`, a second `X` extends again.
 */
internal abstract class RetriedOp<T>(
    protected val broker: BrokerCore,
    val key: String,
    private val request: Request,
    private val deadlineNanos: Long,
) {
    val future = CompletableFuture<T>()
    private val lock = ReentrantLock()
    private var done = false

    /** The copies still waiting for a reply, one per connection. */
    private val inFlight = ArrayList<Req>()
    private var lastFailure: Throwable? = null
    private var everSent = false
    private var retryScheduled = false
    protected val timings get() = broker.env.timings

    protected inner class Req(val conn: Connection) : Outgoing(request) {
        override fun onReply(conn: Connection, reply: Reply) = onReplyFor(this, reply)
        override fun onConnectionLost(conn: Connection, sent: Boolean, dropped: Boolean, cause: Throwable) =
            onLost(this, cause)
    }

    /** The outcome of a final reply to [req] (null: not a reply to this op). */
    protected abstract fun outcome(req: Req, reply: Reply): T?

    /** The failure once [deadlineNanos] has passed; [sent]: some copy may have reached the server. */
    protected abstract fun expired(sent: Boolean, waitingForReply: Boolean, cause: Throwable?): TicketingException

    /** The failure when the server answered `E perm` to this request. */
    protected abstract fun refused(cause: TicketingException.Permission): TicketingException

    fun start() {
        val left = maxOf(0L, (deadlineNanos - System.nanoTime()) / 1_000_000L)
        if (!broker.env.schedule(left, ::expire)) {
            fail(TicketingException.Closed())
            return
        }
        attempt()
    }

    /**
     * Sends the line on one usable connection that does not carry a copy yet.
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
                        everSent = true
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
        if (closed) fail(TicketingException.Closed())
    }

    /** [req] has had no reply for the hedge delay: send a copy on another connection too. */
    private fun hedge(req: Req) {
        lock.withLock { if (done || req !in inFlight) return }
        broker.env.debug { "${request.text()}: no reply from ${req.conn.address} yet; also sending it elsewhere" }
        attempt()
        // Still silent later: a connection that became usable meanwhile gets a copy too.
        broker.env.schedule(timings.releaseHedgeMillis) { hedge(req) }
    }

    private fun onReplyFor(req: Req, reply: Reply) {
        val result = outcome(req, reply) ?: return
        lock.withLock {
            inFlight.remove(req)
            if (done) return
            done = true
        }
        broker.env.debug { "${request.text()} via ${req.conn.address}: $result" }
        broker.deliver { future.complete(result) }
    }

    private fun onLost(req: Req, cause: Throwable) {
        lock.withLock {
            if (!inFlight.remove(req) || done) return
            lastFailure = cause
        }
        // E perm answering this request: no connection will accept this key.
        if (cause is TicketingException.Permission) {
            fail(refused(cause))
            return
        }
        attempt()
    }

    private fun expire() {
        val (sent, waiting, cause) = lock.withLock { Triple(everSent, inFlight.isNotEmpty(), lastFailure) }
        fail(expired(sent, waiting, cause))
    }

    /** Ends it now with [e] (close()); a reply that comes later is ignored. */
    fun abort(e: TicketingException) = fail(e)

    private fun fail(e: TicketingException) {
        lock.withLock {
            if (done) return
            done = true
        }
        broker.deliver { future.completeExceptionally(e) }
    }
}

/**
 * Releases one exact token: `R key token`, until an absolute 5 s after it
 * started. `R` = released, `N` = not held; no final reply by then is
 * [TicketingException.ReleaseFailed], never assumed success.
 */
internal class ReleaseOp(broker: BrokerCore, key: String, val token: Long) :
    RetriedOp<ReleaseResult>(
        broker,
        key,
        Request.Release(key, token),
        System.nanoTime() + broker.env.timings.releaseWindowMillis * 1_000_000L,
    ) {
    override fun outcome(req: Req, reply: Reply): ReleaseResult? = when (reply) {
        is Reply.Released -> ReleaseResult.RELEASED
        is Reply.NotHeld -> ReleaseResult.NOT_HELD
        else -> null
    }

    override fun expired(sent: Boolean, waitingForReply: Boolean, cause: Throwable?): TicketingException =
        TicketingException.ReleaseFailed(
            key,
            token,
            if (waitingForReply) "no reply within ${timings.releaseWindowMillis} ms" else "no usable connection within ${timings.releaseWindowMillis} ms",
            cause,
        )

    override fun refused(cause: TicketingException.Permission) = TicketingException.Permission("${cause.message} (release of $key)")

    /** close() stopped waiting before this release had its outcome. */
    fun closedFirst() = abort(
        TicketingException.ReleaseFailed(key, token, "the broker was closed first (close() waits at most ${timings.closeWaitMillis} ms for releases)", null),
    )
}

/** What an `X` achieved: the grant holds until [writeNanos] + the new lease (server time counted from its receipt). */
internal sealed class ExtendOutcome {
    class Extended(val writeNanos: Long) : ExtendOutcome()
    object Gone : ExtendOutcome()
}

/**
 * Extends one exact grant: `X key token lease`, re-sent like a release until
 * [deadlineNanos] (5 s after the call or the conservative lease end, whichever
 * is first). `X` = extended, from the moment that copy was written; `G` = the
 * grant is gone.
 */
internal class ExtendOp(broker: BrokerCore, key: String, token: Long, leaseSeconds: Int, deadlineNanos: Long) :
    RetriedOp<ExtendOutcome>(broker, key, Request.Extend(key, token, leaseSeconds), deadlineNanos) {
    override fun outcome(req: Req, reply: Reply): ExtendOutcome? = when (reply) {
        is Reply.Extended -> ExtendOutcome.Extended(req.writeNanos)
        is Reply.Gone -> ExtendOutcome.Gone
        else -> null
    }

    override fun expired(sent: Boolean, waitingForReply: Boolean, cause: Throwable?): TicketingException =
        if (sent) {
            TicketingException.Indeterminate(key, "no reply to the extension in time: the lease may or may not have been extended", cause)
        } else {
            TicketingException.NoConnection("no usable connection to extend $key; nothing was sent", cause)
        }

    override fun refused(cause: TicketingException.Permission) = TicketingException.Permission("${cause.message} (extension of $key)")
}
