# Debian's Kokkos (Trilinos 13.2) config puts "<prefix>/include" on
# Kokkos::kokkos, which resolves to the non-existent /usr/lib/include; the
# headers live in Kokkos_INCLUDE_DIRS (/usr/include/trilinos). Replace the bad
# entry so targets linking Kokkos::kokkos configure and compile untouched.
if(TARGET Kokkos::kokkos)
  get_target_property(_collc_kk_inc Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
  set(_collc_kk_fixed "")
  foreach(_dir IN LISTS _collc_kk_inc)
    if(EXISTS "${_dir}")
      list(APPEND _collc_kk_fixed "${_dir}")
    endif()
  endforeach()
  foreach(_dir IN LISTS Kokkos_INCLUDE_DIRS)
    get_filename_component(_dir "${_dir}" REALPATH)
    if(EXISTS "${_dir}")
      list(APPEND _collc_kk_fixed "${_dir}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _collc_kk_fixed)
  set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_collc_kk_fixed}")
  # The same config also lists a bare "-DKOKKOS_DEPENDENCE" among link items.
  get_target_property(_collc_kk_libs Kokkos::kokkos INTERFACE_LINK_LIBRARIES)
  if(_collc_kk_libs)
    list(REMOVE_ITEM _collc_kk_libs "-DKOKKOS_DEPENDENCE")
    set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_LINK_LIBRARIES "${_collc_kk_libs}")
  endif()
endif()
