# FastCGI's C library (Debian: libfcgi-dev). Sets FCGI_FOUND, FCGI_LIBRARY and FCGI_INCLUDE_DIR.
find_library(FCGI_LIBRARY fcgi)
find_path(FCGI_INCLUDE_DIR fcgiapp.h)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(FCGI REQUIRED_VARS FCGI_LIBRARY FCGI_INCLUDE_DIR)
