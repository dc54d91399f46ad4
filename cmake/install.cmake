# Install rules: libtcinfer.so / libtcinfer.a, tcinfer.h, the tcinfer CLI, a pkg-config file and
# a CMake package (find_package(tcinfer) -> tcinfer::tcinfer, tcinfer::tcinfer_static).
include(CMakePackageConfigHelpers)

set_target_properties(tcinfer_shared PROPERTIES EXPORT_NAME tcinfer)
set_target_properties(tcinfer PROPERTIES EXPORT_NAME tcinfer_static)
install(TARGETS tcinfer_shared tcinfer EXPORT tcinferTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS tcinfer_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/tcinfer.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(TCI_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tcinfer)
install(EXPORT tcinferTargets NAMESPACE tcinfer:: DESTINATION ${TCI_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tcinferConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tcinferConfig.cmake INSTALL_DESTINATION ${TCI_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tcinferConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tcinferConfig.cmake ${PROJECT_BINARY_DIR}/tcinferConfigVersion.cmake
  DESTINATION ${TCI_CMAKE_DIR})

# pkg-config: the shared library in Libs, what the static one needs in Libs.private
set(TCI_PC_LIBS_PRIVATE "-lprotobuf-c -lopenblas -lpthread -lm")
if(TCI_CUDA)
  string(APPEND TCI_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -lcublasLt -lcublas")
  get_filename_component(TCI_CUDNN_DIR "${CUDNN_LIBRARY}" DIRECTORY)
  string(APPEND TCI_PC_LIBS_PRIVATE " -L${TCI_CUDNN_DIR} -lcudnn -lstdc++ -ldl -lrt")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/tcinfer.pc.in ${PROJECT_BINARY_DIR}/tcinfer.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tcinfer.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
