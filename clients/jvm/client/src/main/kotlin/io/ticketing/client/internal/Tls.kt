package io.ticketing.client.internal

import io.ticketing.client.TicketingException
import io.ticketing.client.TlsMode
import java.io.ByteArrayInputStream
import java.io.InputStream
import java.net.InetSocketAddress
import java.net.Socket
import java.nio.charset.StandardCharsets
import java.nio.file.Files
import java.nio.file.Paths
import java.security.KeyStore
import java.security.cert.CertificateFactory
import java.security.cert.X509Certificate
import javax.net.ssl.SNIHostName
import javax.net.ssl.SSLContext
import javax.net.ssl.SSLEngine
import javax.net.ssl.SSLSocket
import javax.net.ssl.SSLSocketFactory
import javax.net.ssl.TrustManagerFactory
import javax.net.ssl.X509ExtendedTrustManager

/** Opens sockets for one [TlsMode]; the SSL context is built once, when the broker is built. */
internal class SocketOpener(private val mode: TlsMode) {
    private val factory: SSLSocketFactory? = when (mode) {
        TlsMode.Off -> null
        TlsMode.SystemRoots -> SSLContext.getDefault().socketFactory
        is TlsMode.Ca -> contextTrusting(loadCertificates(mode.pem)).socketFactory
        TlsMode.InsecureSkipVerify -> SSLContext.getInstance("TLS").apply { init(null, arrayOf(TrustAll), null) }.socketFactory
    }

    /**
     * Connects (and for TLS, completes the handshake) within [timeoutMillis].
     * [onSocket] sees the raw socket before connecting so that a concurrent
     * close can interrupt the connect.
     */
    fun open(address: HostPort, timeoutMillis: Long, onSocket: (Socket) -> Unit): Socket {
        val raw = Socket()
        onSocket(raw)
        raw.tcpNoDelay = true
        raw.keepAlive = true
        raw.connect(InetSocketAddress(address.host, address.port), timeoutMillis.toInt())
        if (factory == null) return raw
        val ssl = factory.createSocket(raw, address.host, address.port, true) as SSLSocket
        onSocket(ssl)
        val params = ssl.sslParameters
        if (mode != TlsMode.InsecureSkipVerify) params.endpointIdentificationAlgorithm = "HTTPS"
        if (!isIpLiteral(address.host)) params.serverNames = listOf(SNIHostName(address.host))
        ssl.sslParameters = params
        ssl.soTimeout = timeoutMillis.toInt()
        ssl.startHandshake()
        ssl.soTimeout = 0
        return ssl
    }

    private fun isIpLiteral(host: String) = host.contains(':') || host.all { it.isDigit() || it == '.' }

    private object TrustAll : X509ExtendedTrustManager() {
        override fun checkClientTrusted(chain: Array<out X509Certificate>?, authType: String?) = Unit
        override fun checkServerTrusted(chain: Array<out X509Certificate>?, authType: String?) = Unit
        override fun checkClientTrusted(chain: Array<out X509Certificate>?, authType: String?, socket: Socket?) = Unit
        override fun checkServerTrusted(chain: Array<out X509Certificate>?, authType: String?, socket: Socket?) = Unit
        override fun checkClientTrusted(chain: Array<out X509Certificate>?, authType: String?, engine: SSLEngine?) = Unit
        override fun checkServerTrusted(chain: Array<out X509Certificate>?, authType: String?, engine: SSLEngine?) = Unit
        override fun getAcceptedIssuers(): Array<X509Certificate> = emptyArray()
    }

    companion object {
        /** The certificates of a PEM path or of PEM text (when it contains `-----BEGIN`). */
        fun loadCertificates(pem: String): List<X509Certificate> {
            val input: InputStream = if (pem.contains("-----BEGIN")) {
                ByteArrayInputStream(pem.toByteArray(StandardCharsets.US_ASCII))
            } else {
                try {
                    Files.newInputStream(Paths.get(pem))
                } catch (e: Exception) {
                    throw TicketingException.InvalidArgument("cannot read the CA file \"$pem\": $e")
                }
            }
            val certs = try {
                input.use { CertificateFactory.getInstance("X.509").generateCertificates(it).map { c -> c as X509Certificate } }
            } catch (e: Exception) {
                throw TicketingException.InvalidArgument("no valid PEM certificate in the CA \"$pem\": $e")
            }
            if (certs.isEmpty()) throw TicketingException.InvalidArgument("no certificate in the CA \"$pem\"")
            return certs
        }

        fun contextTrusting(certs: List<X509Certificate>): SSLContext {
            val store = KeyStore.getInstance(KeyStore.getDefaultType())
            store.load(null, null)
            certs.forEachIndexed { i, c -> store.setCertificateEntry("ca-$i", c) }
            val tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm())
            tmf.init(store)
            return SSLContext.getInstance("TLS").apply { init(null, tmf.trustManagers, null) }
        }
    }
}
