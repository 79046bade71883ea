# libsystemd through pkg-config (Debian: libsystemd-dev), for sd_notify. Sets Systemd_FOUND and the imported
# target PkgConfig::SYSTEMD.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(SYSTEMD QUIET IMPORTED_TARGET libsystemd)
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Systemd REQUIRED_VARS SYSTEMD_LINK_LIBRARIES)
