package io.ticketing.client.internal

/**
 * Every duration the client uses (CLIENT.md), in one place. The defaults are
 * the contract; tests shrink them to keep the suite fast.
 */
internal data class Timings(
    /** A dropped connection is reconnected to its configured address this often. */
    val reconnectMillis: Long = 3_000,
    /** An idle connection (nothing received for this long) is pinged. */
    val pingIntervalMillis: Long = 5_000,
    /** No pong within this long: the connection is dead. */
    val pingTimeoutMillis: Long = 5_000,
    /**
     * A connection with requests outstanding that has received nothing for this
     * long is pinged, and is dead without a pong within [busyPongTimeoutMillis]:
     * a hung (silent, not closed) server is noticed within about 2 s, not 10.
     */
    val busyPingIntervalMillis: Long = 750,
    val busyPongTimeoutMillis: Long = 1_000,
    /** A gap this much longer than a tick between two deadline checks: the process was paused. */
    val pauseGapMillis: Long = 1_000,
    /**
     * The conservative remaining time assumes the server's clock may run this
     * much faster than ours: the server documents a rate error of about 1% for its
     * leases, and this client's own clock may err the other way.
     */
    val clockRateAllowance: Double = 0.02,
    /** No reply to a sent acquire by wait + this: the connection is closed, the acquire Indeterminate. */
    val replyGraceMillis: Long = 5_000,
    /** A release is retried for this long (absolute, from the call). */
    val releaseWindowMillis: Long = 5_000,
    /**
     * A release with no reply after this long also goes out on another usable
     * connection (same exact token: a duplicate is answered `N`, harmless).
     */
    val releaseHedgeMillis: Long = 500,
    /**
     * While no connection is usable, a release retries this often; and a slot whose redirect target
     * is unreachable goes back to its configured address this often (for up to [reconnectMillis]).
     */
    val releaseRetryMillis: Long = 200,
    /** A `T` more than this before the wait could have run out is a node stepping down. */
    val earlyTimeoutMillis: Long = 100,
    /** Bound on TCP connect + TLS handshake. */
    val connectTimeoutMillis: Long = 5_000,
    /** Bound on the wait for the `H` reply. */
    val helloTimeoutMillis: Long = 5_000,
    /** After a half-close, the server has this long to close its side. */
    val drainTimeoutMillis: Long = 5_000,
    /** How long close() waits for releases in flight. */
    val closeWaitMillis: Long = 5_000,
    /** How often each connection's reader checks its deadlines while nothing arrives (pings, replies). */
    val tickMillis: Long = 50,
    /** Redirects followed in a row before falling back to the normal reconnect cycle. */
    val maxRedirects: Int = 3,
    /** Re-sends after `T`s that came early (node stepping down), per acquire. */
    val maxStepDownResends: Int = 5,
)
