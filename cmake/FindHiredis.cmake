# hiredis through pkg-config (Debian: libhiredis-dev), the presence store shared by N nodes through Redis
# (service/presence/redis_store.hpp). Sets Hiredis_FOUND and the imported target PkgConfig::HIREDIS.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(HIREDIS QUIET IMPORTED_TARGET hiredis)
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Hiredis REQUIRED_VARS HIREDIS_LINK_LIBRARIES)
