package io.ticketing.client.internal

import io.ticketing.client.TicketingException
import io.ticketing.client.TlsMode
import java.net.URLDecoder
import java.nio.charset.StandardCharsets

/**
 * `ticketing://[token@]host[:port][,host[:port]...][?tls=off|system|insecure][&ca=PATH]`,
 * the same URLs as the TypeScript and Python clients: the token and the CA
 * path are percent-decoded; `ca` means [TlsMode.Ca]. [token] and [tls] are
 * null when the URL does not say.
 */
internal class ConnectionUrl(val addresses: List<String>, val token: String?, val tls: TlsMode?) {
    companion object {
        const val SCHEME = "ticketing://"

        fun isUrl(text: String) = text.startsWith(SCHEME)

        fun parse(url: String): ConnectionUrl {
            fun bad(why: String): Nothing = throw TicketingException.InvalidArgument("bad URL \"${redacted(url)}\": $why")
            val rest = url.removePrefix(SCHEME)
            val authority = rest.substringBefore('?')
            val query = if (rest.contains('?')) rest.substringAfter('?') else ""
            val at = authority.lastIndexOf('@')
            val hosts = authority.substring(at + 1).removeSuffix("/")
            if (hosts.isEmpty()) bad("no host")
            val token = if (at < 0) null else decode(authority.substring(0, at)) ?: bad("the token is not percent-encoded correctly")
            var tls: TlsMode? = null
            if (query.isNotEmpty()) {
                for (pair in query.split('&')) {
                    val name = pair.substringBefore('=')
                    val value = decode(pair.substringAfter('=', "")) ?: bad("option $name is not percent-encoded correctly")
                    tls = when {
                        name == "tls" && value == "off" -> TlsMode.Off
                        name == "tls" && value == "system" -> TlsMode.SystemRoots
                        name == "tls" && value == "insecure" -> TlsMode.InsecureSkipVerify
                        name == "ca" && value.isNotEmpty() -> TlsMode.Ca(value)
                        else -> bad("unknown option $name=$value (tls=off|system|insecure, ca=PATH)")
                    }
                }
            }
            val addresses = hosts.split(',')
            addresses.forEach { HostPort.parse(it) }
            return ConnectionUrl(addresses, token, tls)
        }

        private fun decode(text: String): String? = try {
            URLDecoder.decode(text.replace("+", "%2B"), StandardCharsets.UTF_8)
        } catch (_: IllegalArgumentException) {
            null
        }

        /** The URL without its token, for error messages (secrets never appear in them). */
        private fun redacted(url: String): String {
            val rest = url.removePrefix(SCHEME)
            val at = rest.substringBefore('?').lastIndexOf('@')
            return if (at < 0) url else SCHEME + "***" + rest.substring(at)
        }
    }
}
