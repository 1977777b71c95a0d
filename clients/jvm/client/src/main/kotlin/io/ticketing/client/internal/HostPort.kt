package io.ticketing.client.internal

import io.ticketing.client.TicketingException
import io.ticketing.client.wire.Wire

/** A server address; [host] is without brackets (IPv6 literals included). */
internal data class HostPort(val host: String, val port: Int) {
    override fun toString() = if (host.contains(':')) "[$host]:$port" else "$host:$port"

    companion object {
        /** `host:port`, `[v6]:port`, or `host` alone (port 5225). */
        fun parse(text: String): HostPort {
            fun bad(why: String): Nothing = throw TicketingException.InvalidArgument("bad address \"$text\": $why")
            if (text.isEmpty() || text.any { it.code <= 0x20 || it.code == 0x7f }) bad("empty or contains spaces")
            val host: String
            val portText: String?
            if (text.startsWith("[")) {
                val close = text.indexOf(']')
                if (close < 2) bad("unclosed IPv6 bracket")
                host = text.substring(1, close)
                val rest = text.substring(close + 1)
                portText = when {
                    rest.isEmpty() -> null
                    rest.startsWith(":") -> rest.substring(1)
                    else -> bad("text after the IPv6 address")
                }
            } else {
                val colon = text.lastIndexOf(':')
                if (colon < 0) {
                    host = text
                    portText = null
                } else {
                    host = text.substring(0, colon)
                    if (host.contains(':')) bad("IPv6 addresses need brackets: [::1]:5225")
                    portText = text.substring(colon + 1)
                }
            }
            if (host.isEmpty()) bad("no host")
            val port = if (portText == null) Wire.DEFAULT_PORT else portText.toIntOrNull() ?: bad("port is not a number")
            if (port !in 1..65535 || (portText != null && portText.startsWith("0"))) bad("port must be 1..65535")
            return HostPort(host, port)
        }
    }
}
