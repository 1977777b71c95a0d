package io.ticketing.client.support

import java.io.ByteArrayOutputStream
import java.io.IOException
import java.net.InetAddress
import java.net.ServerSocket
import java.net.Socket
import java.nio.charset.StandardCharsets
import java.util.concurrent.CopyOnWriteArrayList

/**
 * A TCP proxy in front of a real server that sees each client line and can
 * cut the connection (with a reset) just before or just after forwarding it.
 */
class TcpProxy(private val upstreamHost: String, private val upstreamPort: Int) : AutoCloseable {
    enum class Action { FORWARD, CUT_BEFORE, CUT_AFTER }

    private val server = ServerSocket(0, 50, InetAddress.getLoopbackAddress())
    private val pairs = CopyOnWriteArrayList<Pair<Socket, Socket>>()

    /** Client sockets whose replies are no longer forwarded (a cut is under way). */
    private val frozen = java.util.Collections.newSetFromMap(java.util.concurrent.ConcurrentHashMap<Socket, Boolean>())

    /** Decides, for each line a client sends, what to do with it. */
    @Volatile var onClientLine: (String) -> Action = { Action.FORWARD }

    /** While true, new client connections are reset at once (the server behind looks down). */
    @Volatile var refuseNew = false

    val address: String get() = "127.0.0.1:${server.localPort}"

    init {
        Thread({
            while (!server.isClosed) {
                val client = try {
                    server.accept()
                } catch (_: IOException) {
                    return@Thread
                }
                if (refuseNew) {
                    client.setSoLinger(true, 0)
                    client.close()
                    continue
                }
                val upstream = try {
                    Socket(upstreamHost, upstreamPort)
                } catch (_: IOException) {
                    client.close()
                    continue
                }
                pairs.add(client to upstream)
                Thread({ pumpLines(client, upstream) }, "proxy-c2s").apply { isDaemon = true }.start()
                Thread({ pumpRaw(upstream, client) }, "proxy-s2c").apply { isDaemon = true }.start()
            }
        }, "proxy-accept").apply { isDaemon = true }.start()
    }

    private fun pumpLines(from: Socket, to: Socket) {
        try {
            val input = from.getInputStream()
            val out = to.getOutputStream()
            val line = ByteArrayOutputStream()
            while (true) {
                val b = input.read()
                if (b < 0) {
                    to.shutdownOutput()
                    return
                }
                line.write(b)
                if (b != '\n'.code) continue
                val text = line.toString(StandardCharsets.UTF_8).trimEnd('\n')
                when (onClientLine(text)) {
                    Action.FORWARD -> out.write(line.toByteArray())
                    Action.CUT_BEFORE -> {
                        cut(from, to)
                        return
                    }
                    Action.CUT_AFTER -> {
                        frozen.add(from) // the client must not see the reply
                        out.write(line.toByteArray())
                        out.flush()
                        // Let the server read it before the reset reaches it.
                        Thread.sleep(200)
                        cut(from, to)
                        return
                    }
                }
                out.flush()
                line.reset()
            }
        } catch (_: Exception) {
            cut(from, to)
        }
    }

    private fun pumpRaw(from: Socket, to: Socket) {
        try {
            val input = from.getInputStream()
            val out = to.getOutputStream()
            val buf = ByteArray(8192)
            while (true) {
                val n = input.read(buf)
                if (n < 0) break
                if (to in frozen) continue
                out.write(buf, 0, n)
                out.flush()
            }
            to.shutdownOutput()
        } catch (_: IOException) {
            cut(from, to)
        }
    }

    private fun cut(a: Socket, b: Socket) {
        for (s in listOf(a, b)) {
            try {
                s.setSoLinger(true, 0)
                s.close()
            } catch (_: IOException) {
            }
        }
    }

    /** Resets every proxied connection. */
    fun cutAll() = pairs.forEach { (a, b) -> cut(a, b) }

    override fun close() {
        server.close()
        cutAll()
    }
}
