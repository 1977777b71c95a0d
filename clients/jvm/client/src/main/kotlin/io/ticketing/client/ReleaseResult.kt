package io.ticketing.client

/** The final answer to a release. */
enum class ReleaseResult {
    /** `R`: that token was the current grant of its key and is gone. */
    RELEASED,

    /**
     * `N`: the token is not current now: the key is free, held under another
     * token, or an earlier attempt of this release succeeded and its reply was lost.
     */
    NOT_HELD,
}
