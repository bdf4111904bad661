# Installation and the Debian package (Linux only): `cpack -G DEB` in a build directory makes
# etwd_VERSION_ARCH.deb with /usr/bin/etwd, its man page (etwd.1, made at build time from
# `etwd --help` by help2man), the systemd unit and a default config file (packaging/debian/).
# tests/e2e/test_package.py builds, installs, checks, starts and purges it.
set(PKG_DIR "${CMAKE_SOURCE_DIR}/packaging/debian")
install(TARGETS etwd RUNTIME DESTINATION bin)
find_program(HELP2MAN help2man)
if(HELP2MAN)
  add_custom_command(OUTPUT "${CMAKE_BINARY_DIR}/etwd.1.gz"
    COMMAND "${HELP2MAN}" --no-info --no-discard-stderr --version-string=${PROJECT_VERSION}
            "--name=trace sessions over HTTPS: Linux tracefs and Windows .etl files"
            --include "${PKG_DIR}/etwd.1.h2m" -o "${CMAKE_BINARY_DIR}/etwd.1" "$<TARGET_FILE:etwd>"
    COMMAND gzip -9nf "${CMAKE_BINARY_DIR}/etwd.1"
    DEPENDS etwd "${PKG_DIR}/etwd.1.h2m" VERBATIM)
  add_custom_target(etwd_man ALL DEPENDS "${CMAKE_BINARY_DIR}/etwd.1.gz")
  install(FILES "${CMAKE_BINARY_DIR}/etwd.1.gz" DESTINATION share/man/man1)
else()
  message(STATUS "help2man not found: no man page (scripts/deps.sh installs it)")
endif()
install(FILES "${PKG_DIR}/etwd.service" DESTINATION /lib/systemd/system)
install(FILES "${PKG_DIR}/etwd.conf" DESTINATION /etc/etwd)
install(FILES "${CMAKE_SOURCE_DIR}/README.md" DESTINATION share/doc/etwd)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME etwd)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "etwd maintainers <etwd@invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "trace sessions over HTTPS: Linux tracefs and Windows .etl files")
set(CPACK_PACKAGE_DESCRIPTION "etwd starts and stops kernel trace sessions (tracefs), replays and converts
 Windows .etl files, and streams the decoded events over REST, WebSocket and ndjson, with a web page.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA "${PKG_DIR}/conffiles;${PKG_DIR}/postinst;${PKG_DIR}/prerm;${PKG_DIR}/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_STRIP_FILES TRUE)
include(CPack)
