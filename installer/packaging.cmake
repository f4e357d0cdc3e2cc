# packaging.cmake: install rules and CPack (.deb and .tar.gz) for Tessera, included from the top
# CMakeLists.txt after the targets exist. `cpack -G DEB` in a build dir writes
# tessera_<version>_<arch>.deb; scripts/package.sh builds a CPU-only tree and runs it.
# Layout (prefix /usr): bin/tessera, bin/tessera-studio, bin/tessera-fetch-data,
# share/tessera/projects/<name>/project.yaml, share/applications, share/metainfo,
# share/icons/hicolor, share/man/man1, share/doc/tessera/{copyright,changelog.gz}.
include(GNUInstallDirs)
set(_pkg_src ${CMAKE_SOURCE_DIR})
set(_pkg_gen ${CMAKE_BINARY_DIR}/packaging)

# ---- version: project version plus git describe/commit when this is a git checkout -----------
set(TESSERA_DEB_VERSION ${PROJECT_VERSION})
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS ${_pkg_src}/.git)
  execute_process(COMMAND ${GIT_EXECUTABLE} describe --tags --long --match "v*"
                  WORKING_DIRECTORY ${_pkg_src} OUTPUT_VARIABLE _describe
                  RESULT_VARIABLE _describe_rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_describe_rc EQUAL 0 AND _describe MATCHES "^v?[0-9.]+-([0-9]+)-g([0-9a-f]+)$")
    set(TESSERA_DEB_VERSION "${PROJECT_VERSION}+git${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
  else()  # no tag: commit count and hash keep versions ordered along main
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-list --count HEAD WORKING_DIRECTORY ${_pkg_src}
                    OUTPUT_VARIABLE _count OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=8 HEAD WORKING_DIRECTORY ${_pkg_src}
                    OUTPUT_VARIABLE _hash OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_count AND _hash)
      set(TESSERA_DEB_VERSION "${PROJECT_VERSION}+git${_count}.${_hash}")
    endif()
  endif()
endif()

# ---- programs ---------------------------------------------------------------------------------
set(CMAKE_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
    GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
install(TARGETS tessera RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET tessera-studio)
  install(TARGETS tessera-studio RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(PROGRAMS ${_pkg_src}/scripts/fetch-data.sh DESTINATION ${CMAKE_INSTALL_BINDIR}
        RENAME tessera-fetch-data)

# ---- example projects (their configs only: no runs.db, no checkpoints) -----------------------
install(DIRECTORY ${_pkg_src}/projects/ DESTINATION ${CMAKE_INSTALL_DATADIR}/tessera/projects
        FILES_MATCHING PATTERN "*.yaml" PATTERN "*.md" PATTERN "*.sh"
        PATTERN "checkpoints" EXCLUDE PATTERN "runs" EXCLUDE)

# ---- desktop integration ------------------------------------------------------------------------
if(TARGET tessera-studio)
  install(FILES ${_pkg_src}/resources/tessera-studio.desktop DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
  install(FILES ${_pkg_src}/resources/io.github.tessera.studio.metainfo.xml
          DESTINATION ${CMAKE_INSTALL_DATADIR}/metainfo)
  foreach(_size 16 22 24 32 48 64 128 256 512)
    install(FILES ${_pkg_src}/resources/icons/tessera-studio-${_size}.png
            DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/${_size}x${_size}/apps RENAME tessera-studio.png)
  endforeach()
  install(FILES ${_pkg_src}/resources/icons/tessera-studio.svg
          DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
endif()

# ---- man pages and Debian docs (gzip -9n: Debian policy) ----------------------------------------
# the changelog's date: the commit's (reproducible), else now
string(TIMESTAMP TESSERA_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
if(GIT_FOUND AND EXISTS ${_pkg_src}/.git)
  execute_process(COMMAND ${GIT_EXECUTABLE} log -1 --format=%cD WORKING_DIRECTORY ${_pkg_src}
                  OUTPUT_VARIABLE _commit_date OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_commit_date)
    set(TESSERA_DEB_DATE ${_commit_date})
  endif()
endif()
configure_file(${_pkg_src}/installer/debian/changelog.in ${_pkg_gen}/changelog @ONLY)
set(_pkg_gz)
foreach(_pair "resources/man/tessera.1|tessera.1.gz" "resources/man/tessera-studio.1|tessera-studio.1.gz"
               "resources/man/tessera-fetch-data.1|tessera-fetch-data.1.gz")
  string(REPLACE "|" ";" _pair ${_pair})
  list(GET _pair 0 _in)
  list(GET _pair 1 _out)
  add_custom_command(OUTPUT ${_pkg_gen}/${_out}
                     COMMAND gzip -9n -c ${_pkg_src}/${_in} > ${_pkg_gen}/${_out}
                     DEPENDS ${_pkg_src}/${_in} VERBATIM)
  list(APPEND _pkg_gz ${_pkg_gen}/${_out})
endforeach()
add_custom_command(OUTPUT ${_pkg_gen}/changelog.gz COMMAND gzip -9n -c ${_pkg_gen}/changelog > ${_pkg_gen}/changelog.gz
                   DEPENDS ${_pkg_gen}/changelog VERBATIM)
add_custom_target(tessera_package_docs ALL DEPENDS ${_pkg_gz} ${_pkg_gen}/changelog.gz)
install(FILES ${_pkg_gen}/tessera.1.gz ${_pkg_gen}/tessera-fetch-data.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
if(TARGET tessera-studio)
  install(FILES ${_pkg_gen}/tessera-studio.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endif()
install(FILES ${_pkg_src}/installer/debian/copyright ${_pkg_gen}/changelog.gz
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/tessera)

# ---- CPack ------------------------------------------------------------------------------------
set(CPACK_PACKAGE_NAME tessera)
set(CPACK_PACKAGE_VENDOR "Tessera")
set(CPACK_PACKAGE_VERSION ${TESSERA_DEB_VERSION})
set(CPACK_PACKAGE_CONTACT "Tessera Team <tessera@example.org>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "training engine and studio for transformer models (CPU build)")
set(CPACK_PACKAGE_INSTALL_DIRECTORY tessera)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB TGZ)
set(CPACK_STRIP_FILES ON)
set(CPACK_SOURCE_IGNORE_FILES "/build.*/" "/\\\\.git/")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_VERSION ${TESSERA_DEB_VERSION})
set(CPACK_DEBIAN_PACKAGE_RELEASE "")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/tessera/tessera")
# the body only: CPack puts CPACK_PACKAGE_DESCRIPTION_SUMMARY on the synopsis line and indents
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "Tessera trains GPT-style transformers and MLPs. The tessera command checks,
plans and runs a project (a project.yaml) and logs each run to SQLite;
tessera-studio shows a project's model, its plan over devices, live runs,
step timelines and run comparisons.

This package is the CPU build: the engine is built without CUDA and runs
on the CPU with OpenMP, OpenBLAS and Gloo. Example projects are installed
in /usr/share/tessera/projects; tessera-fetch-data fills the data cache.")
# dependencies from the binaries' shared libraries (dpkg-shlibdeps), when available
# (a CUDA build links NVIDIA's libraries, which dpkg-shlibdeps may not know: fixed list there)
find_program(DPKG_SHLIBDEPS dpkg-shlibdeps)
if(TESSERA_CUDA)
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "training engine and studio for transformer models (CUDA build)")
  string(REPLACE "This package is the CPU build: the engine is built without CUDA and runs\non the CPU"
         "This package is a CUDA build (it needs NVIDIA's CUDA and NCCL libraries);\nscripts/package.sh makes the CPU build that runs on the CPU"
         CPACK_DEBIAN_PACKAGE_DESCRIPTION "${CPACK_DEBIAN_PACKAGE_DESCRIPTION}")
endif()
if(DPKG_SHLIBDEPS AND NOT TESSERA_CUDA)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS
      "libc6, libstdc++6, libgcc-s1, libyaml-cpp0.7, libsqlite3-0, libopenblas0 | libblas3, libgloo0, zlib1g, libpcre2-8-0, libicu72, libgomp1, libqt6widgets6, libqt6gui6, libqt6core6, libqcustomplot2.1-qt6")
endif()
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "dataset-fashion-mnist, npm")
include(CPack)
