package io.ticketing.client.jdbc

/**
 * The fencing token is not above the high-water mark of its key: a newer lock
 * holder has already written. Roll the transaction back and do not retry it
 * with this token (the lock has moved on).
 *
 * Unchecked on purpose: frameworks that roll back on unchecked exceptions
 * (Spring's `@Transactional`, for one) roll the protected write back
 * without extra configuration.
 */
class StaleTokenException(
    /** The lock key the fence belongs to. */
    val key: String,
    /** The refused token (unsigned 64-bit in a `long`). */
    val token: Long,
    /** The highest token the resource has seen for [key] (unsigned 64-bit in a `long`). */
    val highWater: Long,
) : RuntimeException(
    "stale fencing token for $key: ${java.lang.Long.toUnsignedString(token)} is not above " +
        "${java.lang.Long.toUnsignedString(highWater)}; a newer lock holder has written",
) {
    /** Stable code, the same as `@ticketing/fence`'s `StaleTokenError`. */
    val code: String get() = CODE

    companion object {
        const val CODE = "STALE_TOKEN"
    }
}
