package io.ticketing.client.support

import java.io.File
import java.net.InetAddress
import java.net.ServerSocket
import java.util.concurrent.ThreadLocalRandom

/**
 * The project's port allocator (as @ticketing/test-support's and the Python tests'): loopback
 * ports below the kernel's ephemeral range, so that no outgoing connection takes one before a
 * server binds it, or while a test restarts a server on it and a client reconnects (a client
 * dialling a free port of the ephemeral range can even connect to itself). The process walks
 * the range from a random start and never hands out a port twice.
 */
object Ports {
    private const val LOW = 10_000
    private val high: Int = runCatching {
        File("/proc/sys/net/ipv4/ip_local_port_range").readText().trim().split(Regex("\\s+"))[0].toInt()
    }.getOrDefault(32_768)
    private val span = high - LOW - 1
    private var cursor = ThreadLocalRandom.current().nextInt(span)

    private fun free(port: Int): Boolean =
        runCatching { ServerSocket(port, 1, InetAddress.getLoopbackAddress()).close() }.isSuccess

    /** A port P with P+1 free too (a cluster node's client and peer ports). */
    @Synchronized
    fun freePortPair(): Int {
        repeat(span) {
            val port = LOW + cursor
            cursor = (cursor + 2) % span
            if (free(port) && free(port + 1)) return port
        }
        throw AssertionError("no free port pair in $LOW-$high")
    }

    /** One free port (for a server that is given its port, or one nothing listens on). */
    fun freePort(): Int = freePortPair()
}
