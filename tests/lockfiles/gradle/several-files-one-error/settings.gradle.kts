pluginManagement {
    repositories {
        gradlePluginPortal()
        mavenCentral()
    }
}

dependencyResolutionManagement {
    repositories {
        mavenCentral()
        maven("https://artifacts.corp.example/maven-releases")
    // the closing brace of repositories was lost in a merge
}

rootProject.name = "billing"
