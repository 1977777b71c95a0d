package io.ticketing.client.support

import java.nio.file.Path
import java.nio.file.Paths

/** The repository this suite belongs to (Maven passes it as `ticketing.repo`). */
object Repo {
    val root: Path = Paths.get(System.getProperty("ticketing.repo") ?: "../../..").toAbsolutePath().normalize()
}
