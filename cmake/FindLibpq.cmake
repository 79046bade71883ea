# PostgreSQL's client library through pkg-config (Debian: libpq-dev). Sets Libpq_FOUND and the imported
# target PkgConfig::LIBPQ.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(LIBPQ QUIET IMPORTED_TARGET libpq)
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Libpq REQUIRED_VARS LIBPQ_LINK_LIBRARIES)
