package io.ticketing.client

import io.ticketing.client.internal.Timings
import io.ticketing.client.support.Repo
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.Deferred
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.async
import kotlinx.coroutines.cancel
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestFactory
import org.junit.jupiter.api.Timeout
import java.io.IOException
import java.io.InputStream
import java.net.InetAddress
import java.net.ServerSocket
import java.net.Socket
import java.nio.charset.StandardCharsets
import java.nio.file.Files
import java.nio.file.Path
import java.nio.file.Paths
import java.time.Duration
import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.TimeUnit

/**
 * The shared client conformance suite (testdata/conformance/\*.case; the
 * format is testdata/conformance/README.md) against the JVM client: the
 * same scripted conversations the TypeScript and Python clients run, the
 * same expected outcomes. One dynamic test per case.
 *
 * Acquires run as coroutines in the runner's own `runBlocking` loop, started
 * with `launch(start = UNDISPATCHED)` as the format asks, so `abort=now`
 * cancels before the runner's loop runs anything else.
 */
class ConformanceTest {
    @TestFactory
    @Timeout(600)
    fun cases(): List<DynamicTest> {
        val dir = conformanceDir()
        val cases = Script.load(dir)
        check(cases.isNotEmpty()) { "no conformance cases in ${dir.toAbsolutePath()}" }
        return cases.map { c -> DynamicTest.dynamicTest("${c.file} ${c.name}") { CaseRun(c).run() } }
    }

    @Test
    fun `every case is described in docs client-jvm md`() {
        val doc = Files.readString(Repo.root.resolve("docs/client-jvm.md"))
        val missing = Script.load(conformanceDir()).map { it.name }.filter { !doc.contains("`$it`") }
        assertEquals(emptyList<String>(), missing, "conformance cases missing from docs/client-jvm.md")
    }
}

private fun conformanceDir(): Path =
    System.getProperty("ticketing.conformance")?.let { Paths.get(it) } ?: Repo.root.resolve("testdata/conformance")

/** The outcome of a successful `extend` step. */
private object Extended

/** The certificates of the `tls` fake servers (testdata/conformance/tls). */
internal object ConformanceTls {
    fun file(name: String): Path = conformanceDir().resolve("tls").resolve(name)

    /** Built once; the first call also makes one loopback handshake, so the JDK's TLS start-up cost is not a case's. */
    fun serverSockets(): javax.net.ssl.SSLServerSocketFactory = factory

    private val factory: javax.net.ssl.SSLServerSocketFactory by lazy { build().also(::warmUp) }

    private fun warmUp(f: javax.net.ssl.SSLServerSocketFactory) {
        f.createServerSocket(0, 1, InetAddress.getLoopbackAddress()).use { server ->
            val accept = Thread { runCatching { server.accept().use { (it as javax.net.ssl.SSLSocket).startHandshake() } } }.apply { start() }
            val opener = io.ticketing.client.internal.SocketOpener(TlsMode.Ca(file("ca.pem").toString()))
            opener.open(io.ticketing.client.internal.HostPort("127.0.0.1", server.localPort), 30_000) {}.close()
            accept.join(30_000)
        }
    }

    private fun build(): javax.net.ssl.SSLServerSocketFactory {
        val certs = io.ticketing.client.internal.SocketOpener.loadCertificates(Files.readString(file("cert.pem")))
        val pem = Files.readString(file("key.pem")).lines().filter { !it.startsWith("-----") }.joinToString("")
        val spec = java.security.spec.PKCS8EncodedKeySpec(java.util.Base64.getDecoder().decode(pem))
        val key = runCatching { java.security.KeyFactory.getInstance("EC").generatePrivate(spec) }
            .getOrElse { java.security.KeyFactory.getInstance("RSA").generatePrivate(spec) }
        val store = java.security.KeyStore.getInstance("PKCS12").apply { load(null, null) }
        store.setKeyEntry("server", key, CharArray(0), certs.toTypedArray())
        val kmf = javax.net.ssl.KeyManagerFactory.getInstance(javax.net.ssl.KeyManagerFactory.getDefaultAlgorithm())
        kmf.init(store, CharArray(0))
        return javax.net.ssl.SSLContext.getInstance("TLS").apply { init(kmf.keyManagers, null, null) }.serverSocketFactory
    }
}

/** One directive: its words and where it is. */
internal class Step(val words: List<String>, val line: Int)

internal class Case(val name: String, val file: String, val steps: MutableList<Step> = ArrayList())

internal object Script {
    fun load(dir: Path): List<Case> {
        val out = ArrayList<Case>()
        Files.list(dir).use { files -> files.filter { it.toString().endsWith(".case") }.sorted().toList() }.forEach { file ->
            var current: Case? = null
            Files.readAllLines(file, StandardCharsets.UTF_8).forEachIndexed { i, text ->
                val trimmed = text.trim()
                if (trimmed.isEmpty() || trimmed.startsWith("#")) return@forEachIndexed
                val words = trimmed.split(Regex(" +"))
                if (words[0] == "case") {
                    current = Case(words[1], file.fileName.toString()).also { out.add(it) }
                } else {
                    (current ?: throw IllegalStateException("${file.fileName}:${i + 1}: a directive before the first case"))
                        .steps.add(Step(words, i + 1))
                }
            }
        }
        return out
    }

    /** Same field count, each pattern field `*` or equal. */
    fun matches(pattern: String, line: String): Boolean {
        val p = pattern.split(" ")
        val l = line.split(" ")
        return p.size == l.size && p.indices.all { p[it] == "*" || p[it] == l[it] }
    }
}

/** A scripted fake server of one case. */
internal class Fake(val name: String, refused: Boolean, tls: Boolean = false) : AutoCloseable {
    private val socket: ServerSocket? = when {
        refused -> null
        tls -> ConformanceTls.serverSockets().createServerSocket(0, 50, InetAddress.getLoopbackAddress())
        else -> ServerSocket(0, 50, InetAddress.getLoopbackAddress())
    }
    // A refused address: a free port below the ephemeral range (a client dialling a free ephemeral port may connect to itself).
    val port: Int = socket?.localPort ?: io.ticketing.client.support.Ports.freePort()
    val address get() = "127.0.0.1:$port"
    val conns = CopyOnWriteArrayList<FakeConnection>()
    @Volatile var hello: String? = "H 1 $name" // null: never answer H

    @Volatile var pong = true
    val autos = CopyOnWriteArrayList<Pair<String, String>>()

    fun start() {
        val s = socket ?: return
        Thread({
            while (true) {
                val c = try {
                    s.accept()
                } catch (_: IOException) {
                    return@Thread
                }
                FakeConnection(this, c).also { conns.add(it) }.start()
            }
        }, "conformance-accept-$name").apply { isDaemon = true }.start()
    }

    /** The default answers: H, P, autos. */
    fun answer(c: FakeConnection, line: String) {
        if (line.startsWith("H")) {
            hello?.let { c.send(it) }
            return
        }
        if (line == "P") {
            if (pong) c.send("P")
            return
        }
        val fields = line.split(" ")
        for ((pattern, reply) in autos) {
            if (Script.matches(pattern, line)) {
                c.send(Regex("\\$(\\d+)").replace(reply) { m -> fields.getOrElse(m.groupValues[1].toInt() - 1) { "" } })
                return
            }
        }
    }

    override fun close() {
        runCatching { socket?.close() }
        conns.forEach { it.close() }
    }
}

internal class FakeConnection(val server: Fake, val socket: Socket) {
    class Line(val text: String) {
        @Volatile var matched = false
    }

    val lines = CopyOnWriteArrayList<Line>()

    @Volatile var eof = false

    @Volatile var name: String? = null
    private val writeLock = Any()

    private val reader = Thread({ read(socket.getInputStream()) }, "conformance-read-${server.name}").apply { isDaemon = true }

    fun start() = reader.start()

    private fun read(input: InputStream) {
        val buf = java.io.ByteArrayOutputStream()
        try {
            while (true) {
                val b = input.read()
                if (b < 0) break
                if (b == '\n'.code) {
                    val text = buf.toString(StandardCharsets.UTF_8).removeSuffix("\r")
                    buf.reset()
                    lines.add(Line(text))
                    server.answer(this, text)
                } else {
                    buf.write(b)
                }
            }
        } catch (_: IOException) {
            // a reset or our own close: the client's side has ended either way
        }
        eof = true
    }

    /** Writes [line]; a line starting with `M ` or `E ` is followed by a FIN (unless [raw]), as a real server closes then. */
    fun send(line: String, raw: Boolean = false) = synchronized(writeLock) {
        try {
            socket.getOutputStream().apply {
                write((line + "\n").toByteArray(StandardCharsets.UTF_8))
                flush()
            }
            if (!raw && (line.startsWith("M ") || line.startsWith("E "))) socket.shutdownOutput()
        } catch (_: IOException) {
            // the connection is gone: the bytes are dropped
        }
    }

    fun fin() = synchronized(writeLock) { runCatching { socket.shutdownOutput() } }

    /**
     * Returns once the RST has left. With our reader blocked in a read on the socket, the JDK only
     * pre-closes it and signals the reader, which does the real close (and sends the RST) when it
     * leaves the read: without this wait the client could write its next request into a connection
     * not reset yet, and that request did leave (INDETERMINATE, rightly).
     */
    fun reset() {
        runCatching { socket.setSoLinger(true, 0) }
        close()
        reader.join(3_000)
    }

    fun close() {
        runCatching { socket.close() }
    }

    override fun toString() = "${server.name}/${name ?: "?"}: ${lines.map { it.text }}${if (eof) " <eof>" else ""}"
}

/** One case: its fake servers, its broker, its actions and bindings. */
internal class CaseRun(private val case: Case) {
    private val servers = LinkedHashMap<String, Fake>()
    private val clientAddrs = ArrayList<String>()
    private var token: String? = null
    private var tls = false
    private val gate = java.util.concurrent.locks.ReentrantReadWriteLock()
    private var timings = Timings(tickMillis = 20)
    private lateinit var broker: TicketBroker
    private val actions = HashMap<String, Deferred<Result<Any?>>>()
    private val bound = HashMap<String, FakeConnection>()
    private var stepLine = 0

    private fun fail(message: String): Nothing {
        val conns = servers.values.flatMap { it.conns }.joinToString("\n  ") { it.toString() }
        throw AssertionError("${case.file} ${case.name}, line $stepLine: $message\n  connections:\n  $conns")
    }

    fun run() {
        try {
            runBlocking {
                val scope = CoroutineScope(coroutineContext + SupervisorJob())
                try {
                    var started = false
                    for ((i, step) in case.steps.withIndex()) {
                        stepLine = step.line
                        // Bytes the fake writes just before a pause must still be unread when the client
                        // runs again (as when the process is stopped right then): stop the client first.
                        if (case.steps.getOrNull(i + 1)?.words?.first() == "pause" && step.words[0] in setOf("send", "raw") &&
                            !gate.isWriteLockedByCurrentThread
                        ) {
                            gate.writeLock().lock()
                        }
                        if (setup(step, started)) continue
                        if (!started) {
                            servers.values.forEach { it.start() }
                            broker = TicketBroker.builder().addrs(clientAddrs).token(token).timings(timings).pauseGate(gate)
                                .apply { if (tls) tls(TlsMode.Ca(ConformanceTls.file("ca.pem").toString())) }
                                .connect()
                            started = true
                        }
                        step(scope, step)
                    }
                } finally {
                    if (::broker.isInitialized) runCatching { broker.closeAsync().get(10, TimeUnit.SECONDS) }
                    scope.cancel()
                }
            }
        } finally {
            servers.values.forEach { it.close() }
        }
    }

    private fun subst(text: String): String =
        Regex("\\{([a-z0-9]+)}|\\{(.)\\*(\\d+)}").replace(text) { m ->
            if (m.groupValues[1].isNotEmpty()) {
                servers[m.groupValues[1]]?.address ?: fail("unknown server ${m.groupValues[1]}")
            } else {
                m.groupValues[2].repeat(m.groupValues[3].toInt())
            }
        }

    private fun rest(words: List<String>, from: Int) = subst(words.drop(from).joinToString(" "))

    /** Setup directives; false for a step. */
    private fun setup(step: Step, started: Boolean): Boolean {
        val w = step.words
        // hello, pong and auto may also come among the steps: they change the fake from then on.
        if (started && w[0] !in setOf("hello", "pong", "auto")) return false
        when (w[0]) {
            "server" -> {
                servers[w[1]] = Fake(w[1], refused = w.getOrNull(2) == "refused", tls = w.getOrNull(2) == "tls")
                if (w.getOrNull(2) == "tls") tls = true
            }
            "client" -> clientAddrs.addAll(w.drop(1).map { servers[it]?.address ?: fail("unknown server $it") })
            "token" -> token = w[1]
            "hello" -> server(w[1]).hello = if (w[2] == "none") null else rest(w, 2)
            "pong" -> server(w[1]).pong = w[2] != "off"
            "auto" -> {
                val arrow = w.indexOf("=>")
                server(w[1]).autos.add(subst(w.subList(2, arrow).joinToString(" ")) to rest(w, arrow + 1))
            }
            "timing" -> for (kv in w.drop(1)) {
                val (k, v) = kv.split("=").let { it[0] to it[1].toLong() }
                timings = when (k) {
                    "reconnectMs" -> timings.copy(reconnectMillis = v)
                    "idlePingMs" -> timings.copy(pingIntervalMillis = v)
                    "pongTimeoutMs" -> timings.copy(pingTimeoutMillis = v)
                    "replyGraceMs" -> timings.copy(replyGraceMillis = v)
                    "releaseWindowMs" -> timings.copy(releaseWindowMillis = v, closeWaitMillis = v)
                    "releaseResendMs" -> timings.copy(releaseHedgeMillis = v)
                    "retryMs" -> timings.copy(releaseRetryMillis = v)
                    "earlyTimeoutMs" -> timings.copy(earlyTimeoutMillis = v)
                    else -> fail("unknown timing knob $k")
                }
            }
            else -> return false
        }
        return true
    }

    private fun server(name: String) = servers[name] ?: fail("unknown server $name")

    private suspend fun step(scope: CoroutineScope, step: Step) {
        val w = step.words
        when (w[0]) {
            "acquire" -> {
                val opts = w.drop(3).associate { it.substringBefore("=") to it.substringAfter("=") }
                val ms = { k: String -> Duration.ofMillis(opts[k]?.toLong() ?: 0L) }
                val keepAlive = opts["keepalive"] == "on"
                val d = start(scope, w[1]) { broker.acquire(w[2], ms("wait"), ms("lease"), ms("minwork"), keepAlive) }
                if (opts["abort"] == "now") d.cancel()
            }
            "abort" -> (actions[w[1]] ?: fail("unknown action ${w[1]}")).cancel()
            "release" -> if (w.size == 3) {
                val ticket = ticketOf(w[2])
                start(scope, w[1]) { ticket.release() }
            } else {
                start(scope, w[1]) { broker.release(w[2], java.lang.Long.parseUnsignedLong(w[3])) }
            }
            "extend" -> {
                val ticket = ticketOf(w[2])
                val lease = Duration.ofMillis(w[3].removePrefix("lease=").toLong())
                start(scope, w[1]) { ticket.extend(lease); Extended }
            }
            "dispose" -> {
                val ticket = ticketOf(w[2])
                start(scope, w[1]) { ticket.close() }
            }
            "remaining" -> {
                val (lo, hi) = w[2].split("..").map { it.toLong() }
                val left = ticketOf(w[1]).remaining().toMillis()
                if (left !in lo..hi) fail("remaining time of ${w[1]}: $left ms, expected $lo..$hi")
            }
            "signal" -> {
                val ticket = ticketOf(w[1])
                if (w[2] == "none") {
                    if (!ticket.validity.isActive) fail("the signal of ${w[1]} has fired")
                } else {
                    val within = if (w.size >= 5 && w[3] == "within") w[4].toLong() else 3_000L
                    waitFor("the signal of ${w[1]} to fire with ${w[2]}", within) { if (ticket.validity.isActive) null else Unit }
                    val reason = signalReason(ticket)
                    if (reason != w[2]) fail("the signal of ${w[1]} fired with $reason, expected ${w[2]}")
                }
            }
            "pause" -> {
                // Every thread of the client stops at its next gate, as under SIGSTOP.
                if (!gate.isWriteLockedByCurrentThread) gate.writeLock().lock()
                try {
                    Thread.sleep(w[1].toLong())
                } finally {
                    gate.writeLock().unlock()
                }
            }
            "ready" -> start(scope, w[1]) { broker.waitReady(Duration.ofMillis(w[2].toLong())) }
            "close" -> start(scope, w[1]) { broker.closeSuspending() }
            "outcome" -> {
                val within = if (w.size >= 4 && w[w.size - 2] == "within") w.last().toLong() else 3_000L
                val expected = (if (w.size >= 4 && w[w.size - 2] == "within") w.subList(2, w.size - 2) else w.drop(2)).joinToString(" ")
                val got = describe(outcomeOf(w[1], within))
                if (got != expected) fail("outcome of ${w[1]}: expected $expected, got $got")
            }
            "pending" -> if ((actions[w[1]] ?: fail("unknown action ${w[1]}")).isCompleted) {
                fail("${w[1]} has settled: ${describe(settled(actions[w[1]]!!))}")
            }
            "sleep" -> delay(w[1].toLong())
            "conn" -> {
                val c = waitFor("a connection to ${w[1]}") {
                    server(w[1]).conns.firstOrNull { it.name == null && it.lines.isNotEmpty() }
                }
                bind(w[3], c)
            }
            "expect" -> {
                val hasWithin = w.size >= 4 && w[w.size - 2] == "within"
                val within = if (hasWithin) w.last().toLong() else 3_000L
                val words = if (hasWithin) w.subList(0, w.size - 2) else w
                val arrow = words.indexOf("->")
                val pattern = subst((if (arrow > 0) words.subList(2, arrow) else words.drop(2)).joinToString(" "))
                val (c, line) = waitFor("a line \"$pattern\" on ${w[1]}", within) {
                    targets(w[1]).firstNotNullOfOrNull { c -> c.lines.firstOrNull { !it.matched && Script.matches(pattern, it.text) }?.let { c to it } }
                }
                line.matched = true
                if (arrow > 0) bind(words[arrow + 1], c)
            }
            "count" -> {
                val pattern = subst(w.subList(2, w.size - 1).joinToString(" "))
                val n = targets(w[1]).sumOf { c -> c.lines.count { Script.matches(pattern, it.text) } }
                val range = w.last().split("..").map { it.toInt() }.let { it.first()..it.last() }
                if (n !in range) fail("expected ${w.last()} lines \"$pattern\" on ${w[1]}, found $n")
            }
            "distinct" -> if (conn(w[1]) === conn(w[2])) fail("${w[1]} and ${w[2]} are the same connection")
            "eof" -> {
                val within = if (w.size == 4 && w[2] == "within") w[3].toLong() else 3_000L
                val c = conn(w[1])
                waitFor("the client's side of ${w[1]} to end", within) { if (c.eof) c else null }
            }
            "open" -> if (conn(w[1]).eof) fail("the client's side of ${w[1]} has ended")
            "send" -> conn(w[1]).send(rest(w, 2))
            "raw" -> conn(w[1]).send(rest(w, 2), raw = true)
            "fin" -> conn(w[1]).fin()
            "reset" -> conn(w[1]).reset()
            else -> fail("unknown step ${w[0]}")
        }
    }

    private fun start(scope: CoroutineScope, id: String, body: suspend () -> Any?): Deferred<Result<Any?>> {
        if (id in actions) fail("action id $id used twice")
        val d = scope.async(start = CoroutineStart.UNDISPATCHED) {
            try {
                Result.success(body())
            } catch (t: Throwable) {
                Result.failure(t)
            }
        }
        actions[id] = d
        return d
    }

    private suspend fun ticketOf(id: String): Ticket = outcomeOf(id, 3_000).getOrNull() as? Ticket ?: fail("acquire $id returned no ticket")

    /** The code the ticket's signal fired with: its validity job's cancellation cause. */
    private fun signalReason(ticket: Ticket): String {
        var t: Throwable? = runCatching { @OptIn(kotlinx.coroutines.InternalCoroutinesApi::class) ticket.validity.getCancellationException() }.getOrNull()
        while (t != null && t !is TicketingException) t = t.cause
        return (t as? TicketingException)?.code ?: "unknown"
    }

    private suspend fun outcomeOf(id: String, withinMillis: Long): Result<Any?> {
        val d = actions[id] ?: fail("unknown action $id")
        waitFor("$id to settle", withinMillis) { if (d.isCompleted) Unit else null }
        return settled(d)
    }

    /** A settled action's result; a cancelled one (its coroutine cancelled by `abort`) is its CancellationException. */
    @OptIn(kotlinx.coroutines.ExperimentalCoroutinesApi::class)
    private fun settled(d: Deferred<Result<Any?>>): Result<Any?> = try {
        d.getCompleted()
    } catch (e: CancellationException) {
        Result.failure(e)
    }

    private fun describe(r: Result<Any?>): String = r.fold(
        onSuccess = {
            when (it) {
                is Ticket -> "ticket ${it.tokenString}"
                ReleaseResult.RELEASED -> "released"
                ReleaseResult.NOT_HELD -> "not-held"
                Extended -> "extended"
                else -> "ok"
            }
        },
        onFailure = {
            when (it) {
                is TicketingException -> it.code
                is CancellationException -> "ABORTED"
                else -> "unexpected $it"
            }
        },
    )

    private fun targets(t: String): List<FakeConnection> = when {
        t == "*" -> servers.values.flatMap { it.conns }
        servers.containsKey(t) -> servers[t]!!.conns.toList()
        else -> listOf(conn(t))
    }

    private fun conn(name: String) = bound[name] ?: fail("no connection bound to $name")

    private fun bind(name: String, c: FakeConnection) {
        val already = bound[name]
        if (already != null && already !== c) fail("$name is bound to another connection")
        bound[name] = c
        c.name = name
    }

    private suspend fun <T : Any> waitFor(what: String, withinMillis: Long = 3_000, probe: () -> T?): T {
        val end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(withinMillis)
        while (true) {
            probe()?.let { return it }
            if (System.nanoTime() - end > 0) fail("waited $withinMillis ms for $what")
            delay(10)
        }
    }
}
