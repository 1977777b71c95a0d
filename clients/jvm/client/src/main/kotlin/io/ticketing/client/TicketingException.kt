package io.ticketing.client

/**
 * Every failure the client reports. Each subclass has a stable [code], the
 * same as the TypeScript client's error codes (CLIENT.md "Errors").
 *
 * Cancellation is not one of them: a cancelled acquire fails with the
 * platform's own `CancellationException` (coroutine cancellation,
 * `CompletableFuture.cancel`, or an interrupted `acquireBlocking`).
 */
sealed class TicketingException(
    /** Stable, documented code, e.g. `"TIMEOUT"`. */
    val code: String,
    message: String,
    cause: Throwable? = null,
) : RuntimeException(message, cause) {

    /** An argument is out of range or malformed; nothing was sent. */
    class InvalidArgument(message: String) : TicketingException(INVALID_ARGUMENT, message)

    /** No connection is usable; nothing was sent. */
    class NoConnection(message: String, cause: Throwable? = null) : TicketingException(NO_CONNECTION, message, cause)

    /** `T`: the wait ran out. Nothing is held. */
    class Timeout(val key: String) : TicketingException(TIMEOUT, "not granted within the wait: $key")

    /** `B`: a server limit is reached. Nothing changed on the server; retry later as a new acquire. */
    class Capacity(val key: String) : TicketingException(CAPACITY, "server capacity reached, not queued: $key")

    /**
     * The request may have reached the server but its reply was lost: the lock
     * may or may not have been granted. Do not enter the critical section;
     * the acquire is never re-sent automatically.
     */
    class Indeterminate(val key: String, message: String, cause: Throwable? = null) :
        TicketingException(INDETERMINATE, "outcome unknown for $key: $message", cause)

    /**
     * Granted, but the conservative remaining lease was not positive or below
     * the minimum-work budget; the client releases that exact token in the background.
     */
    class InsufficientLease(val key: String, val token: Long, val remainingMillis: Long, val minWorkMillis: Long) :
        TicketingException(
            INSUFFICIENT_LEASE,
            "granted $key (token ${java.lang.Long.toUnsignedString(token)}) with ${remainingMillis} ms left, " +
                "less than the ${minWorkMillis} ms budget; released again",
        )

    /** The ticket's conservative lease end has passed. */
    class LeaseEnded(val key: String) : TicketingException(LEASE_ENDED, "lease ended: $key")

    /** The ticket was released. */
    class Released(val key: String) : TicketingException(RELEASED, "ticket released: $key")

    /** No final reply to a release within its 5 s window: the lock may still be held until its lease ends. */
    class ReleaseFailed(val key: String, val token: Long, message: String, cause: Throwable? = null) :
        TicketingException(
            RELEASE_FAILED,
            "release of $key (token ${java.lang.Long.toUnsignedString(token)}) not confirmed: $message",
            cause,
        )

    /** The broker is closed. */
    class Closed(message: String = "broker closed") : TicketingException(CLOSED, message)

    /** The server sent something that breaks the protocol, or answered `E`. */
    class Protocol(message: String, cause: Throwable? = null) : TicketingException(PROTOCOL, message, cause)

    /** The server refused the client token (`E auth`). */
    class Auth(message: String) : TicketingException(AUTH, message)

    /**
     * `E perm`: the key is outside the key prefixes the client identity may
     * use. Nothing was granted. Reported for an acquire or release when it
     * was the only request unanswered on its connection (the `E` line names
     * no key); with several, the acquires on it are [Indeterminate] (their
     * cause a [Protocol] error naming the `E perm`), since another of them may
     * have been granted just before.
     */
    class Permission(message: String) : TicketingException(PERMISSION, message)

    companion object {
        const val INVALID_ARGUMENT = "INVALID_ARGUMENT"
        const val NO_CONNECTION = "NO_CONNECTION"
        const val TIMEOUT = "TIMEOUT"
        const val CAPACITY = "CAPACITY"
        const val INDETERMINATE = "INDETERMINATE"
        const val INSUFFICIENT_LEASE = "INSUFFICIENT_LEASE"
        const val LEASE_ENDED = "LEASE_ENDED"
        const val RELEASED = "RELEASED"
        const val RELEASE_FAILED = "RELEASE_FAILED"
        const val CLOSED = "CLOSED"
        const val PROTOCOL = "PROTOCOL"
        const val AUTH = "AUTH"
        const val PERMISSION = "PERMISSION"
    }
}
