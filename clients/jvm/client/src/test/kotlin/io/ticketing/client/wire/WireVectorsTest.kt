package io.ticketing.client.wire

import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestFactory
import org.junit.jupiter.api.assertThrows
import java.io.ByteArrayOutputStream
import java.nio.charset.StandardCharsets
import java.nio.file.Files
import java.nio.file.Path
import java.nio.file.Paths

/**
 * The shared wire vectors (testdata/wire-vectors.txt at the repository root),
 * also read by the TypeScript codec tests: both codecs stay byte-compatible.
 */
class WireVectorsTest {

    data class Vector(val lineNo: Int, val dir: String, val source: String, val bytes: ByteArray, val expectedCode: String?)

    @Test
    fun `has vectors for both directions`() {
        val vectors = load()
        assertTrue(vectors.count { it.dir == "req" } > 40)
        assertTrue(vectors.count { it.dir == "rep" } > 30)
    }

    @TestFactory
    fun `every shared vector`(): List<DynamicTest> = load().map { v ->
        DynamicTest.dynamicTest("${v.dir} line ${v.lineNo}: ${v.source} -> ${v.expectedCode ?: "ok"}") {
            val parse = { if (v.dir == "req") Request.parse(v.bytes) else Reply.parse(v.bytes) }
            if (v.expectedCode == null) {
                val formatted = when (val parsed = parse()) {
                    is Request -> parsed.encode()
                    is Reply -> parsed.encode()
                    else -> error("unreachable")
                }
                assertArrayEquals(v.bytes + '\n'.code.toByte(), formatted, "formatting gives the line back")
            } else {
                val e = assertThrows<WireFormatException> { parse() }
                assertEquals(v.expectedCode, e.code, e.message)
            }
        }
    }

    companion object {
        /** The shared vectors file of the repository. */
        fun vectorsFile(): Path {
            val fromProperty = System.getProperty("ticketing.vectors")
            return if (fromProperty != null) Paths.get(fromProperty) else io.ticketing.client.support.Repo.root.resolve("testdata/wire-vectors.txt")
        }

        fun load(): List<Vector> {
            val lines = Files.readAllLines(vectorsFile(), StandardCharsets.UTF_8)
            return lines.mapIndexedNotNull { idx, line ->
                if (line.isEmpty() || line.startsWith("#")) return@mapIndexedNotNull null
                val parts = line.split('\t')
                require(parts.size == 3 && (parts[0] == "req" || parts[0] == "rep")) { "malformed vector at line ${idx + 1}: $line" }
                val expected = parts[2]
                require(expected == "ok" || expected.startsWith("err ")) { "bad expectation at line ${idx + 1}" }
                Vector(idx + 1, parts[0], parts[1], unescape(parts[1]), if (expected == "ok") null else expected.removePrefix("err "))
            }
        }

        fun unescape(text: String): ByteArray {
            val out = ByteArrayOutputStream()
            var i = 0
            while (i < text.length) {
                val c = text[i]
                if (c != '\\') {
                    val cp = text.codePointAt(i)
                    out.write(String(Character.toChars(cp)).toByteArray(StandardCharsets.UTF_8))
                    i += Character.charCount(cp)
                    continue
                }
                when (val n = text[i + 1]) {
                    '\\' -> { out.write(0x5c); i += 2 }
                    't' -> { out.write(0x09); i += 2 }
                    'r' -> { out.write(0x0d); i += 2 }
                    'x' -> { out.write(text.substring(i + 2, i + 4).toInt(16)); i += 4 }
                    '=' -> {
                        val count = text.substring(i + 2, i + 5).toInt()
                        repeat(count) { out.write(text[i + 5].code) }
                        i += 6
                    }
                    else -> error("bad escape \\$n in vector $text")
                }
            }
            return out.toByteArray()
        }
    }
}
