# The libraries the service needs (folio-fcgi, folio-admin, folio-cli and their tests and benchmarks), looked
# up from the top-level CMakeLists.txt so that service/, tools/, tests/ and bench/ all see the imported
# targets. None is required: FOLIO_SERVICE_MISSING lists the Debian package of each one not found (the names
# scripts/deps.sh installs), and the top level turns the service off when the list is not empty. Each lookup
# is a find_package, so CMAKE_DISABLE_FIND_PACKAGE_<Name> hides it (tests/engine_only/run.cmake).
list(APPEND CMAKE_MODULE_PATH ${PROJECT_SOURCE_DIR}/cmake)
set(FOLIO_SERVICE_MISSING "")
macro(folio_service_needs found package)
  if(NOT ${found})
    list(APPEND FOLIO_SERVICE_MISSING ${package})
  endif()
endmacro()

find_package(FCGI QUIET)
folio_service_needs(FCGI_FOUND libfcgi-dev)             # the FastCGI loop (main.cpp)
find_package(SQLite3 QUIET)
folio_service_needs(SQLite3_FOUND libsqlite3-dev)       # storage, one node
find_package(PkgConfig QUIET)
folio_service_needs(PKG_CONFIG_FOUND pkg-config)        # finds libpq and libsystemd
find_package(Libpq QUIET)
folio_service_needs(Libpq_FOUND libpq-dev)              # storage, N nodes (PostgreSQL)
find_package(OpenSSL QUIET)
folio_service_needs(OpenSSL_FOUND libssl-dev)           # key hashing, base64
find_package(CURL QUIET)
folio_service_needs(CURL_FOUND libcurl4-openssl-dev)    # publishing to nginx; folio-cli
find_package(RapidJSON CONFIG QUIET)
folio_service_needs(RapidJSON_FOUND rapidjson-dev)      # the service's JSON
find_package(Systemd QUIET)
folio_service_needs(Systemd_FOUND libsystemd-dev)       # sd_notify: folio-fcgi tells systemd it is ready
find_package(Hiredis QUIET)
folio_service_needs(Hiredis_FOUND libhiredis-dev)       # presence shared by N nodes through Redis
find_package(Threads REQUIRED)
