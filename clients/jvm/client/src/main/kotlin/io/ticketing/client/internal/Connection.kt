package io.ticketing.client.internal

import io.ticketing.client.TicketingException
import io.ticketing.client.wire.LineFramer
import io.ticketing.client.wire.Reply
import io.ticketing.client.wire.Request
import io.ticketing.client.wire.WireFormatException
import java.io.IOException
import java.io.OutputStream
import java.net.Socket
import java.util.ArrayDeque
import java.util.concurrent.locks.ReentrantLock
import kotlin.concurrent.withLock

/**
 * One connection (session) to one address: connect, `H` first, then
 * pipelined requests matched to replies by (op, key).
 *
 * Threads: a reader (connects, then reads and dispatches replies, and judges
 * every deadline) and a writer (writes what is queued, in order). All state is
 * guarded by [lock]; callbacks into requests and the slot are always made
 * without holding it.
 *
 * Deadlines are judged by the reader only, and only when a read has found
 * nothing to read: a reply that has arrived is always read before anything is
 * declared overdue. A long gap between two of the reader's checks means the
 * process was paused (SIGSTOP, a VM freeze, a long safepoint): deadlines are
 * then re-armed from the resume instead of expiring, since the replies may
 * have come during the pause and are read next.
 */
internal class Connection(
    private val env: Env,
    private val slot: Slot,
    val address: HostPort,
) {
    enum class State { CONNECTING, HELLO, READY, DRAINING, CLOSED }

    private val lock = ReentrantLock()
    private val writing = ReentrantLock()
    private val wakeWriter = lock.newCondition()
    private var state = State.CONNECTING
    private val outbox = ArrayDeque<Outgoing>()
    private val pending = HashMap<String, ArrayDeque<Outgoing>>()
    private var socket: Socket? = null
    private var rawSocket: Socket? = null
    private var sinceNanos = System.nanoTime()
    private var pingSentNanos = 0L
    private var pingOutstanding = false
    /** How long the ping in flight may go unanswered (idle and busy pings differ; see [siblingWentSilent]). */
    private var pongWithinNanos = 0L

    /** Deadlines count from no earlier than this (the end of the last pause). */
    private var rearmedNanos = 0L
    private var lastCheckNanos = System.nanoTime()

    /** The `P` written just before our half-close: its pong proves the server read up to our FIN. */
    private var drainProbe: Outgoing? = null
    private var drainProbeAnswered = false

    @Volatile private var lastReadNanos = System.nanoTime()

    /** Monotonic time at which the `H` reply made it usable (0 before). */
    @Volatile var readySinceNanos = 0L
        private set

    /** The node that answered `H` (null before). */
    @Volatile var nodeName: String? = null
        private set

    /** Usable: the `H` reply came and nothing has closed or half-closed it. */
    val isReady: Boolean get() = lock.withLock { state == State.READY }

    /**
     * Another connection to the same server went silent and nothing has come on this one since:
     * likely silent too (a stopped process, a frozen VM). It is pinged with the busy pong deadline,
     * and the pool gives it no new request until data arrives on it.
     */
    @Volatile var isSuspect = false
        private set

    /** A connection to the same server died of silence: check this one at once (see [isSuspect]). */
    fun siblingWentSilent() {
        lock.withLock {
            if (state != State.READY) return
            isSuspect = true
            val now = System.nanoTime()
            val short = millis(env.timings.busyPongTimeoutMillis)
            // A ping already in flight: its deadline becomes the short one too.
            if (pingOutstanding) pongWithinNanos = minOf(pongWithinNanos, now - pingSentNanos + short) else pingLocked(now, short)
        }
        env.debug { "$address: another connection to it went silent; pinged at once" }
    }

    /**
     * Another connection to the same server went silent, and this one was only redirected here:
     * closed at once, so its slot dials its own address (whose node may be taking over) instead of
     * waiting for a pong that likely never comes. Returns false, changing nothing but marking it
     * suspect, while an acquire or extension waits on it (closing would make its outcome unknown):
     * it is then checked by [siblingWentSilent]. Releases are re-sent elsewhere, as on any close.
     */
    fun leaveForSilentSibling(): Boolean {
        val waiting = lock.withLock {
            if (state != State.READY) return false
            isSuspect = true // nothing new is sent to it meanwhile
            pending.values.any { q -> q.any { it.request is Request.Acquire || it.request is Request.Extend } }
        }
        if (waiting) return false
        close(IOException("$address: another connection to it went silent"))
        return true
    }

    val currentState: State get() = lock.withLock { state }

    fun start() {
        daemonThread("ticketing-read-$address") { runReader() }
    }

    /**
     * Queues [req] if the connection is usable (or [req] is the hello).
     * Registration order is write order, so replies of one (op, key) match in order.
     */
    fun enqueue(req: Outgoing): Boolean = lock.withLock {
        val ok = state == State.READY || (state == State.HELLO && req.request is Request.Hello)
        if (!ok) return false
        val queue = pending.getOrPut(req.matchKey) { ArrayDeque() }
        if (queue.isEmpty()) req.headSinceNanos = System.nanoTime()
        queue.addLast(req)
        outbox.addLast(req)
        wakeWriter.signal()
        true
    }

    enum class AbortOutcome { UNSENT, SENT, GONE }

    /**
     * Withdraws [req]: if it was not written yet, it is removed and the server
     * never sees it. If it may have been written, it stays registered (so its
     * reply is still matched and handed to it) and the connection is half-closed.
     */
    fun abort(req: Outgoing): AbortOutcome {
        lock.withLock {
            if (state == State.CLOSED) return AbortOutcome.GONE
            if (!req.sent) {
                if (!outbox.remove(req)) return AbortOutcome.GONE
                unregisterLocked(req)
                return AbortOutcome.UNSENT
            }
        }
        halfClose("acquire aborted after a possible send")
        return AbortOutcome.SENT
    }

    /**
     * Stops writing (FIN: the server drops this connection's waiters) and keeps
     * reading until the server closes. Requests not yet written move elsewhere.
     */
    fun halfClose(why: String) {
        val unsent: List<Outgoing>
        lock.withLock {
            if (state != State.READY && state != State.HELLO) return
            state = State.DRAINING
            sinceNanos = System.nanoTime()
            unsent = outbox.toList()
            outbox.clear()
            unsent.forEach { unregisterLocked(it) }
            // A crashed server's kernel closes with a FIN too: only a pong to this last
            // line before our FIN shows the server itself read the FIN and dropped our waiters.
            val probe = Untracked(Request.Ping)
            drainProbe = probe
            pending.getOrPut(probe.matchKey) { ArrayDeque() }.addLast(probe)
            outbox.addLast(probe)
            wakeWriter.signalAll()
        }
        env.debug { "half-closing $address: $why" }
        val cause = IOException("connection half-closed: $why")
        unsent.forEach { it.onConnectionLost(this, sent = false, dropped = false, cause = cause) }
    }

    /** Closes at once; every request still waiting learns it from [Outgoing.onConnectionLost]. */
    fun close(cause: Throwable) = fail(cause, dropped = false, redirect = null)

    /**
     * Hello timeout, pings, reply deadlines, drain timeout. Called by the
     * reader only, after a read found nothing more to read.
     */
    private fun checkDeadlines(now: Long) {
        val t = env.timings
        var failure: Throwable? = null
        var silent = false
        lock.withLock {
            // A gap far longer than the read timeout: this process was paused. What was due
            // during the pause counts from now, so replies that came meanwhile are read first.
            if (now - lastCheckNanos > millis(t.tickMillis + t.pauseGapMillis)) {
                env.debug { "$address: no check for ${(now - lastCheckNanos) / 1_000_000} ms (paused?); deadlines re-armed" }
                rearmedNanos = now
            }
            lastCheckNanos = now
            val from = { at: Long -> maxOf(at, rearmedNanos) }
            when (state) {
                State.HELLO -> if (now - from(sinceNanos) > millis(t.helloTimeoutMillis)) {
                    failure = IOException("no reply to H within ${t.helloTimeoutMillis} ms")
                }
                State.READY -> {
                    val busy = unansweredCountLocked() > 0
                    var ping = false
                    if (pingOutstanding) {
                        // An idle ping in flight when requests come to wait on it: its pong is due by the busy
                        // deadline from now (a hung server still shows in about 2 s).
                        if (busy) pongWithinNanos = minOf(pongWithinNanos, now - from(pingSentNanos) + millis(t.busyPongTimeoutMillis))
                        if (now - from(pingSentNanos) > pongWithinNanos) {
                            failure = IOException("no pong within ${pongWithinNanos / 1_000_000} ms: connection dead")
                            // Not even a pong: the server is silent (one queue's overdue reply below is not:
                            // it may be answering everything else).
                            silent = true
                        }
                    } else {
                        // Requests outstanding: a hung server (alive, silent) must be noticed
                        // within about 2 s, so ping sooner than on an idle connection.
                        val interval = millis(if (busy) t.busyPingIntervalMillis else t.pingIntervalMillis)
                        if (now - lastReadNanos >= interval && now - pingSentNanos >= interval) ping = true
                    }
                    if (failure == null) failure = overdueLocked(now)
                    if (ping) pingLocked(now, millis(if (busy) t.busyPongTimeoutMillis else t.pingTimeoutMillis))
                }
                State.DRAINING -> if (now - from(sinceNanos) > millis(t.drainTimeoutMillis)) {
                    failure = IOException("server did not close within ${t.drainTimeoutMillis} ms after our half-close")
                }
                else -> Unit
            }
        }
        failure?.let {
            // Before this one's requests move on: none of them must go to a sibling as silent as this.
            if (silent) slot.wentSilent(this)
            fail(it, dropped = false, redirect = null)
        }
    }

    /** Queues a `P` that must be answered within [pongWithin] nanoseconds. Holds [lock]. */
    private fun pingLocked(now: Long, pongWithin: Long) {
        val p = Untracked(Request.Ping)
        pending.getOrPut(p.matchKey) { ArrayDeque() }.addLast(p)
        outbox.addLast(p)
        wakeWriter.signal()
        pingOutstanding = true
        pingSentNanos = now
        pongWithinNanos = pongWithin
    }

    /**
     * The oldest sent acquire of each key must be answered by its wait + the
     * grace. A later acquire of the same key cannot be answered before it
     * (PROTOCOL.md ordering), so its clock starts when it becomes the oldest.
     */
    private fun overdueLocked(now: Long): Throwable? {
        val grace = millis(env.timings.replyGraceMillis)
        for (queue in pending.values) {
            val head = queue.peekFirst() ?: continue
            val request = head.request as? Request.Acquire ?: continue
            if (!head.sent) continue
            val deadline = maxOf(head.writeNanos + request.waitSeconds * 1_000_000_000L, head.headSinceNanos, rearmedNanos) + grace
            if (now - deadline > 0) {
                // Closing makes every request in flight on this connection INDETERMINATE: let one
                // written a moment ago have its round trip first (its reply may be on the way).
                if (inFlightSinceLocked(now - millis(IN_FLIGHT_GRACE_MILLIS), except = head)) return null
                return IOException("no reply to A ${request.key} within its wait + ${env.timings.replyGraceMillis} ms")
            }
        }
        return null
    }

    private fun runReader() {
        val s: Socket
        try {
            s = env.opener.open(address, env.timings.connectTimeoutMillis) { raw ->
                lock.withLock {
                    if (state == State.CLOSED) throw IOException("closed while connecting")
                    if (socket == null) rawSocket = raw
                    socket = raw
                }
            }
            // Reads wake up at least every tick, so that deadlines are judged here, on the reader.
            s.soTimeout = env.timings.tickMillis.toInt()
        } catch (e: Exception) {
            fail(e as? IOException ?: IOException(e.toString(), e), dropped = false, redirect = null)
            return
        }
        lock.withLock {
            if (state == State.CLOSED) return
            state = State.HELLO
            sinceNanos = System.nanoTime()
            lastCheckNanos = sinceNanos
        }
        enqueue(Untracked(Request.Hello(env.clientToken)))
        daemonThread("ticketing-write-$address") {
            try {
                runWriter(s.getOutputStream())
            } catch (e: IOException) {
                fail(e, dropped = false, redirect = null)
            }
        }
        val framer = LineFramer()
        val buf = ByteArray(8192)
        try {
            val input = s.getInputStream()
            while (true) {
                val n = try {
                    input.read(buf)
                } catch (_: java.net.SocketTimeoutException) {
                    env.gate()
                    checkDeadlines(System.nanoTime())
                    if (currentState == State.CLOSED) return
                    continue
                }
                env.gate()
                if (n < 0) {
                    val (draining, clean) = lock.withLock { (state == State.DRAINING) to drainProbeAnswered }
                    fail(
                        IOException(
                            when {
                                !draining -> "connection closed by the server"
                                clean -> "server closed after our half-close"
                                else -> "connection closed after our half-close without answering our last ping (the server may have crashed)"
                            },
                        ),
                        dropped = draining && clean,
                        redirect = null,
                    )
                    return
                }
                lastReadNanos = System.nanoTime()
                if (isSuspect) heardFrom()
                if (!framer.push(buf, 0, n, ::handleLine)) return
                // A connection that never goes quiet still has its deadlines judged, once all that has come is read.
                val now = System.nanoTime()
                if (now - lastCheckNanos >= millis(env.timings.tickMillis) && nothingBuffered(input)) checkDeadlines(now)
            }
        } catch (e: WireFormatException) {
            fail(TicketingException.Protocol("oversized reply from $address: ${e.message}"), dropped = false, redirect = null)
        } catch (e: IOException) {
            fail(e, dropped = false, redirect = null)
        } catch (e: RuntimeException) {
            fail(e, dropped = false, redirect = null)
        }
    }

    /** Data came while suspect: the server is alive, so the pool may use this connection again. */
    private fun heardFrom() {
        lock.withLock { isSuspect = false }
        slot.onHeardFrom()
    }

    /** One reply line: parse, match, hand over. Returns false when the connection is finished. */
    private fun handleLine(buf: ByteArray, start: Int, end: Int): Boolean {
        val reply = try {
            Reply.parse(buf, start, end)
        } catch (e: WireFormatException) {
            fail(TicketingException.Protocol("malformed reply from $address: ${e.message}"), dropped = false, redirect = null)
            return false
        }
        when (reply) {
            is Reply.Redirect -> {
                fail(
                    TicketingException.Protocol("$address is not the active node; active: ${reply.address ?: "unknown"}"),
                    dropped = false,
                    redirect = reply,
                )
                return false
            }
            is Reply.Error -> {
                val e = when (reply.code) {
                    "auth" -> TicketingException.Auth("$address refused the client token: ${reply.text}")
                    // The E line names no key: it is the answer of the one request still
                    // unanswered, if there is exactly one; otherwise no request can be told apart.
                    "perm" -> if (unansweredCount() == 1) {
                        TicketingException.Permission("$address refused the key: ${reply.text}")
                    } else {
                        TicketingException.Protocol("$address answered E perm ${reply.text} with several requests unanswered")
                    }
                    else -> TicketingException.Protocol("$address answered E ${reply.code} ${reply.text}")
                }
                fail(e, dropped = false, redirect = null)
                return false
            }
            else -> Unit
        }
        val matched = lock.withLock { matchLocked(reply) }
        if (matched == null) {
            fail(TicketingException.Protocol("reply \"${reply.text()}\" from $address matches no pending request"), dropped = false, redirect = null)
            return false
        }
        matched.onReply(this, reply)
        if (reply is Reply.Hello) {
            nodeName = reply.nodeName
            slot.onReady(this, reply.nodeName)
        }
        return true
    }

    /** True when nothing that has arrived is waiting to be read (TLS: neither decrypted nor raw bytes). */
    private fun nothingBuffered(input: java.io.InputStream): Boolean =
        input.available() == 0 && (lock.withLock { rawSocket }?.getInputStream()?.available() ?: 0) == 0

    /** Requests (acquires, releases, extensions) written and not answered yet. */
    private fun unansweredCount(): Int = lock.withLock { unansweredCountLocked() }

    private fun unansweredCountLocked(): Int = pending.values.sumOf { q -> q.count { it.sent && it !is Untracked } }

    private fun matchLocked(reply: Reply): Outgoing? {
        val key = when (reply) {
            is Reply.Hello -> "H"
            is Reply.Pong -> "P"
            is Reply.Granted -> "A " + reply.key
            is Reply.TimedOut -> "A " + reply.key
            is Reply.Busy -> "A " + reply.key
            is Reply.Released -> "R " + reply.key
            is Reply.NotHeld -> "R " + reply.key
            is Reply.Extended -> "X " + reply.key
            is Reply.Gone -> "X " + reply.key
            is Reply.Redirect, is Reply.Error -> return null
        }
        val queue = pending[key] ?: return null
        val head = queue.peekFirst()
        if (head == null || !head.sent) return null
        queue.removeFirst()
        if (queue.isEmpty()) pending.remove(key) else queue.peekFirst().headSinceNanos = System.nanoTime()
        when (reply) {
            is Reply.Pong -> if (head === drainProbe) drainProbeAnswered = true else pingOutstanding = false
            is Reply.Hello -> if (state == State.HELLO) {
                state = State.READY
                readySinceNanos = System.nanoTime()
            }
            else -> Unit
        }
        return head
    }

    /** True if a request other than [except] was written after [sinceNanos] and is unanswered. */
    private fun inFlightSinceLocked(sinceNanos: Long, except: Outgoing): Boolean =
        pending.values.any { q -> q.any { it !== except && it.sent && it !is Untracked && it.writeNanos - sinceNanos > 0 } }

    private fun unregisterLocked(req: Outgoing) {
        val queue = pending[req.matchKey] ?: return
        queue.remove(req)
        if (queue.isEmpty()) pending.remove(req.matchKey)
    }

    private fun runWriter(out: OutputStream) {
        while (true) {
            lock.withLock {
                while (outbox.isEmpty() && (state == State.HELLO || state == State.READY)) wakeWriter.await()
            }
            env.beforeWrite?.invoke()
            env.gate()
            val batch = ArrayList<Outgoing>()
            var failure: IOException? = null
            var finished = false
            // Held from taking the batch to the end of its write: a failure seen by the reader
            // meanwhile waits for this write's outcome (see fail), so requests never written are
            // known to be unsent.
            writing.lock()
            try {
                val current = lock.withLock {
                    // DRAINING: only the probe is left in the outbox, written just before the FIN.
                    if (state == State.HELLO || state == State.READY || state == State.DRAINING) {
                        val now = System.nanoTime()
                        batch.addAll(outbox)
                        outbox.clear()
                        for (r in batch) {
                            r.sent = true
                            r.writeNanos = now
                            if (r.headSinceNanos == 0L) r.headSinceNanos = now
                        }
                    }
                    state
                }
                when (current) {
                    State.CLOSED -> finished = true
                    State.DRAINING -> {
                        writeBatch(out, batch)
                        halfCloseSocket()
                        finished = true
                    }
                    else -> writeBatch(out, batch)
                }
            } catch (e: IOException) {
                // One write call of a small batch either hands all of it to the kernel or fails
                // having handed none (a connection already reset or closed): then those requests
                // never left, and move to another connection instead of ending INDETERMINATE.
                if (batch.sumOf { it.bytes.size } <= UNSENT_IF_FAILED_BYTES) lock.withLock { batch.forEach { it.sent = false } }
                failure = e
            } finally {
                writing.unlock()
            }
            failure?.let {
                fail(it, dropped = false, redirect = null)
                return
            }
            if (finished) return
        }
    }

    /** The whole batch in one write call (see the catch in [runWriter]). */
    private fun writeBatch(out: OutputStream, batch: List<Outgoing>) {
        if (batch.isEmpty()) return
        val bytes = if (batch.size == 1) batch[0].bytes else java.io.ByteArrayOutputStream().also { b -> batch.forEach { b.write(it.bytes) } }.toByteArray()
        out.write(bytes)
        out.flush()
    }

    private fun halfCloseSocket() {
        val s = lock.withLock { socket } ?: return
        try {
            s.shutdownOutput()
        } catch (_: UnsupportedOperationException) {
            // A socket that cannot half-close: closing is the only way left to tell the server.
            fail(IOException("cannot half-close this socket"), dropped = false, redirect = null)
        }
    }

    /**
     * Closes the connection (once) and tells every request still registered on
     * it, then the slot. [dropped]: the server closed cleanly after our half-close.
     */
    private fun fail(cause: Throwable, dropped: Boolean, redirect: Reply.Redirect?) {
        // A write in progress decides whether its requests left: wait for it (briefly: a write
        // blocked on a full window ends only when the socket is closed below). Held until the
        // connection is CLOSED: released earlier, the writer could take the next batch (marking it
        // sent) before the close, and a request that never left would be reported as maybe sent.
        // (Same order as the writer's: `writing`, then `lock`.)
        val settled = !writing.isHeldByCurrentThread && writing.tryLock(WRITE_SETTLE_MILLIS, java.util.concurrent.TimeUnit.MILLISECONDS)
        val lost: List<Outgoing>
        val wasReady: Boolean
        try {
            lock.withLock {
                if (state == State.CLOSED) return
                wasReady = state == State.READY || state == State.DRAINING
                state = State.CLOSED
                lost = pending.values.flatten()
                pending.clear()
                outbox.clear()
                try {
                    socket?.close()
                } catch (_: IOException) {
                    // closing anyway
                }
                wakeWriter.signalAll()
            }
        } finally {
            if (settled) writing.unlock()
        }
        env.debug { "connection to $address closed: $cause" }
        for (r in lost) r.onConnectionLost(this, r.sent, dropped && r.sent, cause)
        slot.onClosed(this, wasReady, redirect, cause, afterOwnHalfClose = dropped)
    }

    override fun toString() = "Connection($address)"

    companion object {
        fun millis(ms: Long) = ms * 1_000_000L

        /** How long an overdue verdict waits for a request written just before it (see overdueLocked). */
        const val IN_FLIGHT_GRACE_MILLIS = 100L

        /** Far below any socket send buffer: a failed write of this much sent nothing. */
        const val UNSENT_IF_FAILED_BYTES = 4096

        /**
         * How long a failure waits for a write in progress. A write of a small batch takes
         * microseconds, but a writer thread descheduled between taking its batch and writing it
         * holds the lock longer on a loaded machine; 100 ms was not enough there (CI at load 8: a
         * request the reset connection never sent ended INDETERMINATE instead of moving to the
         * other connection). Only a write blocked on a full send window takes this long to settle.
         */
        const val WRITE_SETTLE_MILLIS = 1_000L

        fun daemonThread(name: String, body: () -> Unit): Thread =
            Thread({ IoThreads.mark(); body() }, name).apply {
                isDaemon = true
                start()
            }
    }
}
