! The same through `use mpi_f08` (mpi_host.f90 says what is checked): derived-type handles, the
! MPI_Status type, optional ierror left out, MPI_IN_PLACE, MPI_BOTTOM and the ignore sentinels.
program ferry_fortran_f08
  use, intrinsic :: iso_c_binding, only: c_long
  use mpi_f08
  implicit none
  interface
    integer(c_long) function ferry_mpi_fortran_calls() bind(C, name="ferry_mpi_fortran_calls")
      import :: c_long
    end function
    integer(c_long) function ferry_mpi_pipelined_sent() bind(C, name="ferry_mpi_pipelined_sent")
      import :: c_long
    end function
  end interface
  integer, parameter :: nbig = 300000
  integer :: ierr, me, n, peer, i, idx, cnt, total, failures, outcount, indices(2)
  type(MPI_Datatype) :: vec, absolute
  type(MPI_Status) :: status, statuses(2)
  type(MPI_Request) :: reqs(2)
  integer :: v(4), lens(1)
  integer, volatile :: x(3)   ! written through MPI_BOTTOM: the compiler cannot see it
  integer(kind=MPI_ADDRESS_KIND) :: addr(1)
  integer, allocatable :: a(:), b(:), big(:)
  logical :: expect_entries
  character(len=32) :: arg

  failures = 0
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, me)
  call MPI_Comm_size(MPI_COMM_WORLD, n)
  call get_command_argument(1, arg)
  expect_entries = trim(arg) == 'fortran-entries'
  peer = ieor(me, 1)
  if (mod(n, 2) /= 0) call check(.false., 'needs an even number of ranks')

  call MPI_Type_vector(10, 1, 2, MPI_INTEGER, vec)
  call MPI_Type_commit(vec, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Type_commit ierror')
  allocate(a(20), b(20), big(nbig))
  a = [(100 * me + i, i = 1, 20)]
  b = -1
  if (mod(me, 2) == 0) then
    call MPI_Send(a, 1, vec, peer, 7, MPI_COMM_WORLD)
    call MPI_Recv(b, 1, vec, peer, 8, MPI_COMM_WORLD, status)
  else
    call MPI_Recv(b, 1, vec, peer, 7, MPI_COMM_WORLD, status)
    call MPI_Send(a, 1, vec, peer, 8, MPI_COMM_WORLD)
  end if
  call check(status%MPI_SOURCE == peer .and. status%MPI_TAG == merge(8, 7, mod(me, 2) == 0), 'MPI_Recv status')
  call MPI_Get_count(status, vec, cnt)
  call check(cnt == 1, 'MPI_Recv count')
  call check(all(b(1:20:2) == [(100 * peer + i, i = 1, 20, 2)]) .and. all(b(2:20:2) == -1), 'vector data')

  b = -1
  call MPI_Irecv(b, 20, MPI_INTEGER, peer, 9, MPI_COMM_WORLD, reqs(1))
  call MPI_Isend(a, 20, MPI_INTEGER, peer, 9, MPI_COMM_WORLD, reqs(2))
  call MPI_Waitall(2, reqs, statuses)
  call check(reqs(1) == MPI_REQUEST_NULL .and. reqs(2) == MPI_REQUEST_NULL, 'MPI_Waitall frees the requests')
  call check(statuses(1)%MPI_SOURCE == peer .and. statuses(1)%MPI_TAG == 9, 'MPI_Waitall statuses')
  call check(all(b == [(100 * peer + i, i = 1, 20)]), 'Irecv data')

  b = -1
  call MPI_Irecv(b, 20, MPI_INTEGER, peer, 10, MPI_COMM_WORLD, reqs(1))
  call MPI_Isend(a, 20, MPI_INTEGER, peer, 10, MPI_COMM_WORLD, reqs(2))
  outcount = 0
  do while (outcount /= MPI_UNDEFINED)
    call MPI_Waitsome(2, reqs, outcount, indices, statuses)
    do i = 1, merge(outcount, 0, outcount /= MPI_UNDEFINED)
      call check(indices(i) == 1 .or. indices(i) == 2, 'MPI_Waitsome indices from 1')
      if (indices(i) == 1) call check(statuses(i)%MPI_TAG == 10, 'MPI_Waitsome status of the receive')
    end do
  end do
  call check(all(b == [(100 * peer + i, i = 1, 20)]), 'Waitsome data')
  b = -1
  call MPI_Irecv(b, 20, MPI_INTEGER, peer, 11, MPI_COMM_WORLD, reqs(1))
  call MPI_Isend(a, 20, MPI_INTEGER, peer, 11, MPI_COMM_WORLD, reqs(2))
  call MPI_Waitany(2, reqs, idx, MPI_STATUS_IGNORE)
  call check(idx == 1 .or. idx == 2, 'MPI_Waitany index from 1')
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE)
  call check(all(b == [(100 * peer + i, i = 1, 20)]), 'Waitany data')

  if (mod(me, 2) == 0) then
    big = [(i + me, i = 1, nbig)]
    call MPI_Send(big, nbig, MPI_INTEGER, peer, 14, MPI_COMM_WORLD)
    call check(ferry_mpi_pipelined_sent() >= 1, 'the large send went through Ferry (pipelined)')
  else
    big = -1
    call MPI_Recv(big, nbig, MPI_INTEGER, peer, 14, MPI_COMM_WORLD, status)
    call MPI_Get_count(status, MPI_INTEGER, cnt)
    call check(cnt == nbig .and. all(big == [(i + peer, i = 1, nbig)]), 'large message data')
  end if

  v = me
  call MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call check(all(v == n * (n - 1) / 2), 'MPI_Allreduce with MPI_IN_PLACE')
  x = [7, 8, 9] * (me + 1)
  call MPI_Get_address(x, addr(1))
  lens(1) = 3
  call MPI_Type_create_hindexed(1, lens, addr, MPI_INTEGER, absolute)
  call MPI_Type_commit(absolute)
  if (mod(me, 2) == 0) then
    call MPI_Send(MPI_BOTTOM, 1, absolute, peer, 15, MPI_COMM_WORLD)
  else
    x = -1
    call MPI_Recv(MPI_BOTTOM, 1, absolute, peer, 15, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
    call check(all(x == [7, 8, 9] * (peer + 1)), 'MPI_BOTTOM with absolute addresses')
  end if
  call MPI_Type_free(absolute)
  call MPI_Type_free(vec)
  call check(vec == MPI_DATATYPE_NULL, 'MPI_Type_free')
  if (expect_entries) call check(ferry_mpi_fortran_calls() >= 20, "Ferry's Fortran entries counted the calls")

  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (me == 0 .and. total == 0) print '(a)', 'fortran f08: correct'
  ! A main program's allocatables are never freed by themselves: LeakSanitizer would report them.
  deallocate(a, b, big)
  call MPI_Finalize()
  if (total /= 0) stop 1

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      failures = failures + 1
      print '(a,i0,2a)', 'rank ', me, ': WRONG: ', what
    end if
  end subroutine

end program
