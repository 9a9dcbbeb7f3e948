plugins {
    `java-library`
    id("com.diffplug.spotless") version "6.25.0"
}

dependencies {
    implementation("com.google.guava:guava:33.2.1-jre")
    testImplementation("org.junit.jupiter:junit-jupiter:5.10.2")
}

dependencyLocking {
    lockAllConfigurations()
}
