# The Windows zip (Windows builds): `cmake --build build/win --target etwd_zip` (scripts/
# build-windows.sh runs it) → build/win/etwd-VERSION-win64.zip, one folder etwd-VERSION-win64/
# with etwd.exe (stripped), the OpenSSL 3 DLLs civetweb loads at run time (etwd.exe itself
# imports only system DLLs: objdump -p), README-windows.txt and the licences of what it contains.
# tests/e2e/test_wine_zip.py checks the contents and runs etwd.exe from the unpacked zip.
set(ETWD_WIN_OPENSSL_DIR "${CMAKE_BINARY_DIR}/openssl" CACHE PATH
    "libssl-3-x64.dll and libcrypto-3-x64.dll for the zip (scripts/build-windows-openssl.sh)")
set(ETWD_ZIP_NAME "etwd-${PROJECT_VERSION}-win64")
add_custom_target(etwd_zip
  COMMAND ${CMAKE_COMMAND} -DNAME=${ETWD_ZIP_NAME} -DWORK=${CMAKE_BINARY_DIR}/zip
          -DEXE=$<TARGET_FILE:etwd> -DSTRIP=${CMAKE_STRIP} -DSSL=${ETWD_WIN_OPENSSL_DIR}
          -DSRC=${CMAKE_SOURCE_DIR} -DTP=${ETWD_THIRD_PARTY} -DOUT=${CMAKE_BINARY_DIR}/${ETWD_ZIP_NAME}.zip
          -P ${CMAKE_SOURCE_DIR}/cmake/windows_zip_make.cmake
  DEPENDS etwd VERBATIM)
