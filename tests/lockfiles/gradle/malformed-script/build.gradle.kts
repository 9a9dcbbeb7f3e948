plugins {
    `java-library`
}

repositories {
    mavenCentral()
    maven {
        url = uri("https://nexus.corp.example/repository/maven-public/)
    }
}
