plugins {
    id("com.android.application")
    kotlin("android")
}

android {
    namespace = "com.example.notes"
    compileSdk = 34
    defaultConfig {
        applicationId = "com.example.notes"
        minSdk = 26
    }
}

dependencies {
    implementation("androidx.core:core-ktx:1.12.0")
    implementation("com.corp.sync:sync-client:4.1.0")
    testImplementation("junit:junit:4.13.2")
}
