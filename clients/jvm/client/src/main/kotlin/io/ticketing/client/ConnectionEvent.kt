package io.ticketing.client

/**
 * A change of one connection of a broker, for
 * [TicketBroker.Builder.onConnectionEvent] (what Curator's
 * `ConnectionStateListener` gives; the TypeScript client's `'connected'`,
 * `'disconnected'` and `'redirected'` events). Addresses are `host:port`;
 * [configured] is the address of the connection's slot, [address] where it
 * is connected now (they differ after a redirect).
 *
 * Nothing here is needed for correctness: an acquire or release reports its
 * own outcome. Use it for logs, metrics and health checks.
 */
sealed class ConnectionEvent {
    /** The configured address of the slot this connection belongs to. */
    abstract val configured: String

    /** A connection became usable: its `H` was answered by node [nodeName]. */
    data class Connected(val address: String, override val configured: String, val nodeName: String) : ConnectionEvent()

    /**
     * A usable connection ended. [error] is why; null when it ended for a
     * redirect, our own half-close after an aborted acquire, or close().
     */
    data class Disconnected(val address: String, override val configured: String, val error: Throwable?) : ConnectionEvent()

    /** A node answered `M`: it is not the active one; [to] is the address it named (null for `M -`). */
    data class Redirected(val from: String, val to: String?, override val configured: String) : ConnectionEvent()
}

/** A snapshot of a broker's connections ([TicketBroker.state]). */
data class BrokerState(
    val closed: Boolean,
    /** How many connections are usable now. */
    val usable: Int,
    /** One entry per slot (two for a single address), in configured order. */
    val connections: List<ConnectionState>,
)

/** One slot of [BrokerState]. */
data class ConnectionState(
    val configured: String,
    /** Where it is connected or connecting now; null while down. */
    val address: String?,
    val state: State,
    /** The node that answered `H`, once usable. */
    val nodeName: String?,
    /** Why the last connection of this slot failed, if it did. */
    val lastError: Throwable?,
) {
    enum class State {
        /** TCP (and TLS) connect in progress. */
        CONNECTING,

        /** `H` sent, waiting for the reply. */
        GREETING,

        /** Usable. */
        READY,

        /** Half-closed after an aborted acquire, waiting for the server to close. */
        DRAINING,

        /** Closed; a reconnect is scheduled (or the broker is closed). */
        DOWN,
    }
}
