package io.ticketing.client.jdbc

import io.ticketing.client.Ticket
import io.ticketing.client.wire.Keys
import java.sql.Connection
import java.sql.SQLException

/**
 * Checks a fencing token in the same JDBC transaction as the write it
 * protects, and advances the resource's high-water mark: a token that is not
 * above the highest one seen for its key is refused with
 * [StaleTokenException] (roll back then). So a holder whose lease ran out
 * while it was paused (GC, a slow disk, a network partition) cannot
 * overwrite the work of the holder after it. This is what makes a lock
 * without reentrancy or lease extension safe to use for correctness.
 *
 * ```java
 * TicketingFence fence = TicketingFence.postgres();
 * fence.migrate(connection);               // once: CREATE TABLE IF NOT EXISTS
 * connection.setAutoCommit(false);
 * fence.check(connection, ticket);         // before the protected write
 * // ... the protected write, same connection ...
 * connection.commit();
 * ```
 *
 * Two flavours, one rule:
 * - [postgres]: the table of `@ticketing/fence` (`ticketing_fence`, tokens as
 *   `NUMERIC(20,0)`), so JVM and TypeScript services can fence one resource
 *   together; one `INSERT ... ON CONFLICT ... RETURNING` statement.
 * - [portable]: any JDBC database with a table (MySQL, SQL Server, Oracle,
 *   H2, SQLite, PostgreSQL, ...): tokens as 20-digit zero-padded `CHAR(20)`
 *   (text order is numeric order, and no database needs an unsigned 64-bit
 *   type), plain `UPDATE` / `SELECT` / `INSERT`.
 *
 * Concurrent transactions fencing one key queue on its row lock, so the
 * check and the advance are one atomic step. Under REPEATABLE READ or
 * SERIALIZABLE a conflicting caller may get the database's serialization
 * failure instead. Thread-safe and immutable: keep one per table.
 *
 * No dependency beyond `java.sql`: bring your own driver and pool.
 */
class TicketingFence private constructor(
    private val dialect: Dialect,
    /** The table holding the high-water marks. */
    val table: String,
    /** Whether a token equal to the high-water mark may write again (see [allowingSameToken]). */
    val allowsSameToken: Boolean,
) {
    internal enum class Dialect { POSTGRES, PORTABLE }

    /** The same fence on another table (a plain or schema-qualified SQL identifier, e.g. `app.fences`). */
    fun withTable(table: String): TicketingFence {
        require(IDENTIFIER.matches(table)) { "table must be a plain SQL identifier (letters, digits, _; optionally schema.table), got \"$table\"" }
        return TicketingFence(dialect, table, allowsSameToken)
    }

    /**
     * Accepts the token equal to the high-water mark, so one grant can make
     * several fenced writes in several transactions (tokens are unique per
     * grant). By default a token fences exactly one transaction.
     */
    fun allowingSameToken(): TicketingFence = TicketingFence(dialect, table, true)

    /** The `CREATE TABLE IF NOT EXISTS` statement [migrate] runs; run it yourself where that form is not supported. */
    fun migrationSql(): String = when (dialect) {
        Dialect.POSTGRES -> """
            CREATE TABLE IF NOT EXISTS $table (
              key        TEXT PRIMARY KEY,
              token      NUMERIC(20, 0) NOT NULL CHECK (token BETWEEN 1 AND 18446744073709551615),
              updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
            )
        """.trimIndent()
        Dialect.PORTABLE -> """
            CREATE TABLE IF NOT EXISTS $table (
              lock_key VARCHAR(250) NOT NULL PRIMARY KEY,
              token    CHAR(20) NOT NULL
            )
        """.trimIndent()
    }

    /** Creates the table if it does not exist (commits if the connection is in auto-commit mode). */
    @Throws(SQLException::class)
    fun migrate(connection: Connection) {
        connection.createStatement().use { it.execute(migrationSql()) }
    }

    /** [check] with the ticket's key and token. */
    @Throws(SQLException::class)
    fun check(connection: Connection, ticket: Ticket) = check(connection, ticket.key, ticket.token)

    /**
     * Inside the transaction of the protected write, before it: returns if
     * [token] may write (and records it as the new high-water mark of [key]),
     * throws [StaleTokenException] if a token at least as high was seen (roll
     * back then). [token] is the unsigned 64-bit fencing token as held in a
     * `long` ([Ticket.token]).
     *
     * @throws IllegalStateException if [connection] is in auto-commit mode: the
     *   check would be its own transaction and protect nothing
     * @throws SQLException from the driver; with [portable], also when two
     *   transactions fence a key for the very first time at once (roll back
     *   and retry: the row exists from then on)
     */
    @Throws(SQLException::class)
    fun check(connection: Connection, key: String, token: Long) {
        Keys.problem(key)?.let { throw IllegalArgumentException("fence key: $it") }
        require(token != 0L) { "fencing tokens are 1..18446744073709551615, got 0" }
        check(!connection.autoCommit) {
            "TicketingFence.check must run inside the transaction of the write it protects: call setAutoCommit(false) first"
        }
        when (dialect) {
            Dialect.POSTGRES -> checkPostgres(connection, key, token)
            Dialect.PORTABLE -> checkPortable(connection, key, token)
        }
    }

    private fun checkPostgres(connection: Connection, key: String, token: Long) {
        val sql = """
            INSERT INTO $table AS f (key, token) VALUES (?, CAST(? AS NUMERIC))
            ON CONFLICT (key) DO UPDATE SET token = excluded.token, updated_at = now()
              WHERE excluded.token > f.token OR (? AND excluded.token = f.token)
            RETURNING f.token::text
        """.trimIndent()
        val advanced = connection.prepareStatement(sql).use { st ->
            st.setString(1, key)
            st.setString(2, java.lang.Long.toUnsignedString(token))
            st.setBoolean(3, allowsSameToken)
            st.executeQuery().use { it.next() }
        }
        if (advanced) return
        // Refused: the row exists and this transaction holds its lock now, so this read is current.
        throw StaleTokenException(key, token, highWater(connection, "SELECT token::text FROM $table WHERE key = ?", key))
    }

    private fun checkPortable(connection: Connection, key: String, token: Long) {
        val padded = pad(token)
        val compare = if (allowsSameToken) "<=" else "<"
        // A first writer of a new key may insert between our UPDATE and our SELECT; one more round settles it.
        repeat(2) {
            val updated = connection.prepareStatement("UPDATE $table SET token = ? WHERE lock_key = ? AND token $compare ?").use { st ->
                st.setString(1, padded)
                st.setString(2, key)
                st.setString(3, padded)
                st.executeUpdate()
            }
            if (updated > 0) return
            val current = connection.prepareStatement("SELECT token FROM $table WHERE lock_key = ?").use { st ->
                st.setString(1, key)
                st.executeQuery().use { rs -> if (rs.next()) rs.getString(1) else null }
            }
            if (current == null) {
                connection.prepareStatement("INSERT INTO $table (lock_key, token) VALUES (?, ?)").use { st ->
                    st.setString(1, key)
                    st.setString(2, padded)
                    st.executeUpdate()
                }
                return
            }
            val highWater = parse(current.trim())
            val below = java.lang.Long.compareUnsigned(highWater, token)
            if (below > 0 || (below == 0 && !allowsSameToken)) throw StaleTokenException(key, token, highWater)
            // The row appeared (lower) after our UPDATE: try the UPDATE again, now that it can lock the row.
        }
        throw StaleTokenException(key, token, highWater(connection, "SELECT token FROM $table WHERE lock_key = ?", key))
    }

    private fun highWater(connection: Connection, sql: String, key: String): Long =
        connection.prepareStatement(sql).use { st ->
            st.setString(1, key)
            st.executeQuery().use { rs ->
                if (!rs.next()) throw SQLException("fence row of $key vanished during the check")
                parse(rs.getString(1).trim())
            }
        }

    override fun toString() = "TicketingFence($dialect, table=$table, allowsSameToken=$allowsSameToken)"

    companion object {
        private val IDENTIFIER = Regex("[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)?")

        /** PostgreSQL, on `@ticketing/fence`'s table `ticketing_fence`. */
        @JvmStatic
        fun postgres(): TicketingFence = TicketingFence(Dialect.POSTGRES, "ticketing_fence", false)

        /** Any JDBC database with a table, on the table `ticketing_fence_jdbc` (see [migrationSql]). */
        @JvmStatic
        fun portable(): TicketingFence = TicketingFence(Dialect.PORTABLE, "ticketing_fence_jdbc", false)

        /** A token as 20 zero-padded digits: text order is numeric order. */
        internal fun pad(token: Long): String = java.lang.Long.toUnsignedString(token).padStart(20, '0')

        internal fun parse(text: String): Long = java.lang.Long.parseUnsignedLong(text)
    }
}
