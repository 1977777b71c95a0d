package io.ticketing.client.internal

import io.ticketing.client.Ticket
import io.ticketing.client.TicketingException
import io.ticketing.client.wire.Reply
import io.ticketing.client.wire.Request
import java.util.concurrent.CancellationException
import java.util.concurrent.CompletableFuture
import java.util.concurrent.locks.ReentrantLock
import kotlin.concurrent.withLock

/**
 * The future of an acquire. Cancelling it, or completing it exceptionally
 * from outside (e.g. `orTimeout`), aborts the acquire with the semantics of
 * CLIENT.md. Completing it with a value from outside is refused: only the
 * client hands out tickets, and silently turning `complete(x)` into an abort
 * would hide a bug in the caller.
 */
internal class AcquireFuture(private val op: AcquireOp) : CompletableFuture<Ticket>() {
    override fun cancel(mayInterruptIfRunning: Boolean): Boolean {
        op.abort(null)
        return isCancelled
    }

    override fun completeExceptionally(ex: Throwable): Boolean {
        op.abort(ex)
        return isCompletedExceptionally
    }

    override fun complete(value: Ticket?): Boolean = throw refused("complete")

    override fun completeAsync(supplier: java.util.function.Supplier<out Ticket>, executor: java.util.concurrent.Executor): CompletableFuture<Ticket> =
        throw refused("completeAsync")

    override fun completeAsync(supplier: java.util.function.Supplier<out Ticket>): CompletableFuture<Ticket> = throw refused("completeAsync")

    override fun completeOnTimeout(value: Ticket?, timeout: Long, unit: java.util.concurrent.TimeUnit): CompletableFuture<Ticket> =
        throw refused("completeOnTimeout")

    override fun obtrudeValue(value: Ticket?): Unit = throw refused("obtrudeValue")

    override fun obtrudeException(ex: Throwable): Unit = throw refused("obtrudeException")

    private fun refused(what: String) = UnsupportedOperationException(
        "$what on an acquire's future is not allowed: only the client completes it with a ticket; " +
            "use cancel() or orTimeout() to abort the acquire",
    )

    fun succeed(ticket: Ticket): Boolean = super.complete(ticket)
    fun fail(e: Throwable): Boolean = if (e is CancellationException) super.cancel(false) else super.completeExceptionally(e)
}

/**
 * One acquire, from the argument check to its outcome, possibly over several
 * connections: an unsent request moves to another connection, a `T` that came
 * early (node stepping down) or a wait dropped by the server after our
 * half-close is re-sent with the wait that is left. Anything that may have
 * reached the server and lost its reply is Indeterminate, never re-sent.
 */
internal class AcquireOp(
    private val broker: BrokerCore,
    val key: String,
    private val waitSeconds: Int,
    private val leaseSeconds: Int,
    private val minWorkNanos: Long,
    private val keepAlive: Boolean,
) {
    val future = AcquireFuture(this)
    private val lock = ReentrantLock()
    private var done = false
    private var current: Req? = null
    private val tried = HashSet<Connection>()
    private var deadlineNanos = 0L // first write + wait: the caller's wait ends here
    private var resends = 0
    private var acceptsAfterLoss: (Connection) -> Boolean = { true }
    private val timings get() = broker.env.timings

    private inner class Req(val conn: Connection, wait: Int) : Outgoing(Request.Acquire(key, wait, leaseSeconds)) {
        val waitNanos = wait * 1_000_000_000L
        override fun onReply(conn: Connection, reply: Reply) = onReplyFor(this, reply)
        override fun onConnectionLost(conn: Connection, sent: Boolean, dropped: Boolean, cause: Throwable) =
            onLost(this, sent, dropped, cause)
    }

    fun start() {
        val outcome = lock.withLock { if (sendLocked(broker.pool.usable(), waitSeconds)) null else noConnectionLocked(null) }
        outcome?.let { finish(it) }
    }

    /**
     * Aborts: rejects with [reason] (a CancellationException when null). Not
     * yet written: nothing is sent. Possibly written: the connection is
     * half-closed and a grant that still arrives is released. Returns false if
     * the acquire had already finished (the ticket, if any, is untouched).
     */
    fun abort(reason: Throwable?): Boolean {
        val req = lock.withLock {
            if (done) return false
            done = true
            current
        }
        req?.conn?.abort(req)
        finish(Result.failure(reason ?: CancellationException("acquire of $key cancelled")))
        return true
    }

    /** Tries [candidates] in order; true once one took the request. Holds [lock]. */
    private fun sendLocked(candidates: List<Connection>, wait: Int): Boolean {
        for (c in candidates) {
            if (!tried.add(c)) continue
            val r = Req(c, wait)
            if (c.enqueue(r)) {
                current = r
                return true
            }
        }
        current = null
        return false
    }

    private fun noConnectionLocked(cause: Throwable?): Result<Ticket> {
        done = true
        val e = broker.pool.noConnection("no usable connection for $key; nothing was sent")
        if (cause != null && e.cause == null) e.addSuppressed(cause)
        return Result.failure(e)
    }

    private fun onReplyFor(req: Req, reply: Reply) {
        val now = System.nanoTime()
        var compensate = 0L
        var outcome: Result<Ticket>? = null
        lock.withLock {
            val live = !done && req === current
            when (reply) {
                is Reply.Granted -> {
                    if (!live) {
                        compensate = reply.token
                    } else {
                        done = true
                        val leaseNanos = broker.conservativeNanos(leaseSeconds)
                        val remaining = leaseNanos - (now - req.writeNanos)
                        outcome = if (remaining > 0 && remaining >= minWorkNanos) {
                            Result.success(
                                Ticket(broker, key, reply.token, req.writeNanos + leaseNanos, leaseSeconds, if (keepAlive) req.writeNanos else null),
                            )
                        } else {
                            compensate = reply.token
                            Result.failure(
                                TicketingException.InsufficientLease(key, reply.token, remaining / 1_000_000, minWorkNanos / 1_000_000),
                            )
                        }
                    }
                }
                is Reply.TimedOut -> if (live) {
                    if (deadlineNanos == 0L) deadlineNanos = req.writeNanos + req.waitNanos
                    val early = req.waitNanos > 0 &&
                        now < req.writeNanos + req.waitNanos - Connection.millis(timings.earlyTimeoutMillis)
                    outcome = if (early && resends < timings.maxStepDownResends) {
                        resends++
                        broker.env.debug { "T for $key came early: node stepping down; re-sending" }
                        // Not to the node that is stepping down: another node (by the name its H
                        // reply gave: two addresses may reach one node), or a connection made since.
                        val node = req.conn.nodeName
                        resendLocked { c -> c.nodeName != node || c.readySinceNanos - now > 0 }
                    } else {
                        done = true
                        Result.failure(TicketingException.Timeout(key))
                    }
                }
                is Reply.Busy -> if (live) {
                    done = true
                    outcome = Result.failure(TicketingException.Capacity(key))
                }
                else -> Unit
            }
        }
        if (compensate != 0L) broker.compensate(key, compensate)
        outcome?.let { finish(it) }
    }

    private fun onLost(req: Req, sent: Boolean, dropped: Boolean, cause: Throwable) {
        val outcome = lock.withLock {
            if (done || req !== current) return
            current = null
            when {
                !sent -> when {
                    sendLocked(broker.pool.usable().filter(acceptsAfterLoss), req.waitNanosToSeconds()) -> null
                    // Already re-sending after a step-down: wait for a usable connection within the wait.
                    deadlineNanos != 0L -> resendLocked(acceptsAfterLoss)
                    else -> noConnectionLocked(cause)
                }
                // E perm answering this very acquire: refused, nothing granted.
                cause is TicketingException.Permission -> {
                    done = true
                    Result.failure(TicketingException.Permission("${cause.message} (key $key)"))
                }
                dropped -> {
                    if (deadlineNanos == 0L) deadlineNanos = req.writeNanos + req.waitNanos
                    val gone = req.conn
                    acceptsAfterLoss = { c -> c !== gone }
                    resendLocked(acceptsAfterLoss)
                }
                else -> {
                    done = true
                    Result.failure(
                        TicketingException.Indeterminate(key, "the connection to ${req.conn.address} was lost after a possible send", cause),
                    )
                }
            }
        }
        outcome?.let { finish(it) }
    }

    private fun Req.waitNanosToSeconds(): Int = (waitNanos / 1_000_000_000L).toInt()

    /**
     * Sends again, on a usable connection that [accepts], with the wait that
     * is left (whole seconds, rounded down so the caller's wait is never
     * exceeded). With none usable, waits for one until the caller's wait ends,
     * then gives up with Timeout (nothing was granted). Holds [lock].
     */
    private fun resendLocked(accepts: (Connection) -> Boolean): Result<Ticket>? {
        acceptsAfterLoss = accepts
        val now = System.nanoTime()
        val left = deadlineNanos - now
        val wait = if (left <= 0) 0 else (left / 1_000_000_000L).toInt()
        tried.clear()
        if (sendLocked(broker.pool.usable().filter(accepts), wait)) return null
        if (left <= 0) {
            done = true
            return Result.failure(TicketingException.Timeout(key))
        }
        broker.pool.awaitReady(left, accepts).whenCompleteAsync({ _, error ->
            val outcome = lock.withLock {
                if (done || current != null) return@whenCompleteAsync
                if (error != null) {
                    done = true
                    Result.failure(TicketingException.Timeout(key))
                } else {
                    resendLocked(accepts)
                }
            }
            outcome?.let { finish(it) }
        }, broker.env.scheduler)
        return null
    }

    private fun finish(outcome: Result<Ticket>) {
        broker.finished(this)
        broker.deliver {
            outcome.fold(
                onSuccess = { ticket ->
                    if (!future.succeed(ticket)) ticket.close()
                },
                onFailure = { future.fail(it) },
            )
        }
    }
}
