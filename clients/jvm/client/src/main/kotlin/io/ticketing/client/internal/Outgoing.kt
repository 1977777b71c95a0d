package io.ticketing.client.internal

import io.ticketing.client.wire.Reply
import io.ticketing.client.wire.Request

/**
 * One request on one connection, from enqueue to its reply (or to the loss
 * of the connection). The connection guards [sent], [writeNanos] and
 * [headSinceNanos] with its lock; the callbacks are called without it.
 */
internal abstract class Outgoing(val request: Request) {
    val bytes: ByteArray = request.encode()

    /** The pipelining slot this request's reply is matched in: (op, key). */
    val matchKey: String = when (request) {
        is Request.Hello -> "H"
        is Request.Ping -> "P"
        is Request.Acquire -> "A " + request.key
        is Request.Release -> "R " + request.key
        is Request.Extend -> "X " + request.key
    }

    /** True once the writer took it: from then on it may have reached the server. */
    var sent = false

    /** Monotonic time at which its write was issued (valid once [sent]). */
    var writeNanos = 0L

    /** Monotonic time at which it became the oldest unanswered request of its (op, key). */
    var headSinceNanos = 0L

    /** Its reply arrived. */
    abstract fun onReply(conn: Connection, reply: Reply)

    /**
     * The connection is gone without a reply. [sent]: it may have reached the
     * server. [dropped]: the server closed cleanly after our half-close, so an
     * unanswered acquire was dropped by it, not granted.
     */
    abstract fun onConnectionLost(conn: Connection, sent: Boolean, dropped: Boolean, cause: Throwable)
}

/** Requests whose outcome nobody waits for (H, P). */
internal class Untracked(request: Request) : Outgoing(request) {
    override fun onReply(conn: Connection, reply: Reply) = Unit
    override fun onConnectionLost(conn: Connection, sent: Boolean, dropped: Boolean, cause: Throwable) = Unit
}
