package io.ticketing.client.wire

import java.nio.CharBuffer
import java.nio.charset.CharacterCodingException
import java.nio.charset.CodingErrorAction
import java.nio.charset.StandardCharsets

internal object Keys {
    /** Why [key] cannot be sent as a key, or null when it can (PROTOCOL.md "Keys"). */
    fun problem(key: String): String? {
        if (key.isEmpty()) return "a key must be a non-empty string"
        for (ch in key) {
            if (ch.code < 0x21 || ch.code == 0x7f) return "a key cannot contain spaces or control characters"
        }
        val bytes = try {
            StandardCharsets.UTF_8.newEncoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT)
                .encode(CharBuffer.wrap(key))
        } catch (_: CharacterCodingException) {
            return "a key must be valid Unicode (no lone surrogates)"
        }
        if (bytes.remaining() > Wire.MAX_KEY_BYTES) {
            return "a key is at most ${Wire.MAX_KEY_BYTES} bytes of UTF-8 (this one has ${bytes.remaining()})"
        }
        return null
    }
}
