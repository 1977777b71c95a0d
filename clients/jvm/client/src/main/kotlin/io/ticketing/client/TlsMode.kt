package io.ticketing.client

import java.nio.file.Path

/**
 * How connections are secured. The server decides whether its listener is
 * plain or TLS; the client must use the matching mode.
 *
 * Kotlin: `TlsMode.Off`, `TlsMode.SystemRoots`, `TlsMode.Ca("ca.crt")`,
 * `TlsMode.InsecureSkipVerify`. Java: `TlsMode.off()`, `TlsMode.systemRoots()`,
 * `TlsMode.ca("ca.crt")`, `TlsMode.insecureSkipVerify()`.
 */
sealed class TlsMode {
    /** Plain TCP (the default). */
    object Off : TlsMode() {
        override fun toString() = "Off"
    }

    /** TLS, verifying the server against the JDK's default trust store, host name included. */
    object SystemRoots : TlsMode() {
        override fun toString() = "SystemRoots"
    }

    /**
     * TLS, verifying the server against the CA certificate(s) in [pem]: a
     * PEM file path, or PEM text itself when it contains `-----BEGIN`. The
     * host name is verified too.
     */
    data class Ca(val pem: String) : TlsMode() {
        constructor(path: Path) : this(path.toString())
    }

    /** TLS without any verification of the server. For tests only: the client logs a warning. */
    object InsecureSkipVerify : TlsMode() {
        override fun toString() = "InsecureSkipVerify"
    }

    companion object {
        @JvmStatic fun off(): TlsMode = Off
        @JvmStatic fun systemRoots(): TlsMode = SystemRoots
        @JvmStatic fun ca(pem: String): TlsMode = Ca(pem)
        @JvmStatic fun ca(path: Path): TlsMode = Ca(path)
        @JvmStatic fun insecureSkipVerify(): TlsMode = InsecureSkipVerify
    }
}
