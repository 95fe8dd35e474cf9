! A Fortran MPI program (use mpi, and mpif.h in one routine) through Ferry's interposer, host
! buffers, 2 or 4 ranks in pairs (0-1, 2-3). It checks the data of every call and that Ferry saw
! the calls: a large send under FERRY_PROTOCOL_TEST=1 must take Ferry's pipelined protocol
! (ferry_mpi_pipelined_sent), whichever MPI; with the argument "fortran-entries" (Open MPI, whose
! Fortran bindings call PMPI_* directly) Ferry's own Fortran entries must have counted the calls.
! Prints "fortran: correct" on rank 0; exits 1 on any failure.
program ferry_fortran_host
  use, intrinsic :: iso_c_binding, only: c_long
  use mpi
  implicit none
  interface
    integer(c_long) function ferry_mpi_fortran_calls() bind(C, name="ferry_mpi_fortran_calls")
      import :: c_long
    end function
    integer(c_long) function ferry_mpi_pipelined_sent() bind(C, name="ferry_mpi_pipelined_sent")
      import :: c_long
    end function
  end interface
  integer, parameter :: nbig = 300000            ! 1.2 MB: pipelined under FERRY_PROTOCOL_TEST
  integer :: ierr, me, n, peer, vec, i, idx, cnt, total, failures, dup, msg
  integer :: status(MPI_STATUS_SIZE), statuses(MPI_STATUS_SIZE, 2), reqs(2), persist(2)
  integer :: counts(0:3), displs(0:3), types(0:3), recvd(0:3), sent(0:3)
  integer, allocatable :: a(:), b(:), big(:)
  logical :: flag, expect_entries
  character(len=32) :: arg

  failures = 0
  call MPI_Init(ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Init')
  call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
  call get_command_argument(1, arg)
  expect_entries = trim(arg) == 'fortran-entries'
  peer = ieor(me, 1)
  if (mod(n, 2) /= 0) call check(.false., 'needs an even number of ranks')

  ! A derived type (every other integer): Ferry translates it at MPI_Type_commit.
  call MPI_Type_vector(10, 1, 2, MPI_INTEGER, vec, ierr)
  call MPI_Type_commit(vec, ierr)
  allocate(a(20), b(20), big(nbig))
  a = [(100 * me + i, i = 1, 20)]
  b = -1
  if (mod(me, 2) == 0) then
    call MPI_Send(a, 1, vec, peer, 7, MPI_COMM_WORLD, ierr)
    call MPI_Recv(b, 1, vec, peer, 8, MPI_COMM_WORLD, status, ierr)
  else
    call MPI_Recv(b, 1, vec, peer, 7, MPI_COMM_WORLD, status, ierr)
    call MPI_Send(a, 1, vec, peer, 8, MPI_COMM_WORLD, ierr)
  end if
  call check(status(MPI_SOURCE) == peer, 'MPI_Recv status source')
  call MPI_Get_count(status, vec, cnt, ierr)
  call check(cnt == 1, 'MPI_Recv count')
  call check(all(b(1:20:2) == [(100 * peer + i, i = 1, 20, 2)]) .and. all(b(2:20:2) == -1), 'vector data')

  ! Non-blocking, statuses array and MPI_STATUS_IGNORE; Waitany's index counts from 1.
  b = -1
  call MPI_Irecv(b, 20, MPI_INTEGER, peer, 9, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(a, 20, MPI_INTEGER, peer, 9, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, statuses, ierr)
  call check(all(reqs == MPI_REQUEST_NULL), 'MPI_Waitall frees the requests')
  call check(statuses(MPI_SOURCE, 1) == peer .and. statuses(MPI_TAG, 1) == 9, 'MPI_Waitall statuses')
  call check(all(b == [(100 * peer + i, i = 1, 20)]), 'Irecv data')
  b = -1
  call MPI_Irecv(b, 20, MPI_INTEGER, peer, 10, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(a, 20, MPI_INTEGER, peer, 10, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitany(2, reqs, idx, MPI_STATUS_IGNORE, ierr)
  call check(idx == 1 .or. idx == 2, 'MPI_Waitany index from 1')
  call check(reqs(idx) == MPI_REQUEST_NULL, 'MPI_Waitany frees that request')
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  call check(all(b == [(100 * peer + i, i = 1, 20)]), 'Waitany data')

  ! Persistent requests, started twice with new data.
  do i = 1, 2
    a = 1000 * i + me
    b = -1
    if (i == 1) then
      call MPI_Recv_init(b, 20, MPI_INTEGER, peer, 12, MPI_COMM_WORLD, persist(1), ierr)
      call MPI_Send_init(a, 20, MPI_INTEGER, peer, 12, MPI_COMM_WORLD, persist(2), ierr)
    end if
    call MPI_Startall(2, persist, ierr)
    call MPI_Waitall(2, persist, MPI_STATUSES_IGNORE, ierr)
    call check(all(b == 1000 * i + peer), 'persistent data')
  end do
  call MPI_Request_free(persist(1), ierr)
  call MPI_Request_free(persist(2), ierr)
  call check(all(persist == MPI_REQUEST_NULL), 'MPI_Request_free')

  ! Matched probe and a logical flag.
  if (mod(me, 2) == 0) then
    call MPI_Send(a, 5, MPI_INTEGER, peer, 13, MPI_COMM_WORLD, ierr)
  else
    flag = .false.
    do while (.not. flag)
      call MPI_Iprobe(peer, 13, MPI_COMM_WORLD, flag, status, ierr)
    end do
    call MPI_Mprobe(peer, 13, MPI_COMM_WORLD, msg, status, ierr)
    call MPI_Get_count(status, MPI_INTEGER, cnt, ierr)
    call check(cnt == 5, 'MPI_Mprobe count')
    b = -1
    call MPI_Mrecv(b, 5, MPI_INTEGER, msg, MPI_STATUS_IGNORE, ierr)
    call check(all(b(1:5) == 1000 * 2 + peer) .and. msg == MPI_MESSAGE_NULL, 'MPI_Mrecv')
  end if

  ! A large message: Ferry's pipelined protocol (FERRY_PROTOCOL_TEST=1) proves the C entry saw it.
  if (mod(me, 2) == 0) then
    big = [(i + me, i = 1, nbig)]
    call MPI_Send(big, nbig, MPI_INTEGER, peer, 14, MPI_COMM_WORLD, ierr)
    call check(ferry_mpi_pipelined_sent() >= 1, 'the large send went through Ferry (pipelined)')
  else
    big = -1
    call MPI_Recv(big, nbig, MPI_INTEGER, peer, 14, MPI_COMM_WORLD, status, ierr)
    call MPI_Get_count(status, MPI_INTEGER, cnt, ierr)
    call check(cnt == nbig .and. all(big == [(i + peer, i = 1, nbig)]), 'large message data')
  end if

  ! Collectives: a broadcast of the derived type, alltoallw (datatype arrays), a gather.
  b = -1
  if (me == 0) b = [(i, i = 1, 20)]
  call MPI_Bcast(b, 1, vec, 0, MPI_COMM_WORLD, ierr)
  call check(all(b(1:20:2) == [(i, i = 1, 20, 2)]), 'MPI_Bcast of a vector')
  counts = 0
  displs = 0
  types = MPI_INTEGER
  counts(0:n-1) = 1
  displs(0:n-1) = [(4 * i, i = 0, n - 1)]
  sent(0:n-1) = [(10 * me + i, i = 0, n - 1)]
  recvd = -1
  call MPI_Alltoallw(sent, counts, displs, types, recvd, counts, displs, types, MPI_COMM_WORLD, ierr)
  call check(all(recvd(0:n-1) == [(10 * i + me, i = 0, n - 1)]), 'MPI_Alltoallw')
  recvd = -1
  call MPI_Gather(me, 1, MPI_INTEGER, recvd, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (me == 0) call check(all(recvd(0:n-1) == [(i, i = 0, n - 1)]), 'MPI_Gather')

  call in_place_and_bottom(me, n, peer, failures)
  call topology_constructors()

  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  call MPI_Barrier(dup, ierr)
  call MPI_Comm_free(dup, ierr)
  call check(dup == MPI_COMM_NULL, 'MPI_Comm_free')
  call MPI_Type_free(vec, ierr)
  call check(vec == MPI_DATATYPE_NULL, 'MPI_Type_free')
  if (expect_entries) call check(ferry_mpi_fortran_calls() >= 30, "Ferry's Fortran entries counted the calls")

  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (me == 0 .and. total == 0) print '(a)', 'fortran: correct'
  ! A main program's allocatables are never freed by themselves: LeakSanitizer would report them.
  deallocate(a, b, big)
  call MPI_Finalize(ierr)
  if (total /= 0) stop 1

contains

  ! The constructors Ferry reorders, through its Fortran entries: LOGICAL arguments and the
  ! MPI_UNWEIGHTED sentinel (a weighted graph here would mean the sentinel reached C as an array).
  subroutine topology_constructors()
    integer :: cart, graph, rank, dims(1), coords(1), nbrs(2), indeg, outdeg
    integer(c_long) :: before
    logical :: periods(1), weighted
    before = ferry_mpi_fortran_calls()
    dims(1) = n
    periods(1) = .true.
    call MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, .true., cart, ierr)
    call check(ierr == MPI_SUCCESS .and. cart /= MPI_COMM_NULL, 'MPI_Cart_create')
    call MPI_Comm_rank(cart, rank, ierr)
    call MPI_Cart_coords(cart, rank, 1, coords, ierr)
    call check(coords(1) == rank, 'MPI_Cart_coords of a reordered ring')
    call MPI_Comm_free(cart, ierr)
    nbrs = [mod(me + n - 1, n), mod(me + 1, n)]
    call MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, nbrs, MPI_UNWEIGHTED, 2, nbrs, &
                                        MPI_UNWEIGHTED, MPI_INFO_NULL, .true., graph, ierr)
    call check(ierr == MPI_SUCCESS, 'MPI_Dist_graph_create_adjacent')
    call MPI_Dist_graph_neighbors_count(graph, indeg, outdeg, weighted, ierr)
    call check(indeg == 2 .and. outdeg == 2 .and. .not. weighted, &
               'MPI_Dist_graph_neighbors_count after MPI_UNWEIGHTED')
    call MPI_Comm_free(graph, ierr)
    if (expect_entries) call check(ferry_mpi_fortran_calls() >= before + 2, &
                                   "Ferry's Fortran entries of the topology constructors")
  end subroutine

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      failures = failures + 1
      print '(a,i0,2a)', 'rank ', me, ': WRONG: ', what
    end if
  end subroutine

end program

! MPI_IN_PLACE and MPI_BOTTOM as mpif.h declares them (common blocks).
subroutine in_place_and_bottom(me, n, peer, failures)
  implicit none
  include 'mpif.h'
  integer, intent(in) :: me, n, peer
  integer, intent(inout) :: failures
  integer :: v(4), absolute, ierr, lens(1)
  integer, volatile :: x(3)   ! written through MPI_BOTTOM: the compiler cannot see it
  integer(kind=MPI_ADDRESS_KIND) :: addr(1)
  v = me
  call MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (any(v /= n * (n - 1) / 2)) then
    failures = failures + 1
    print '(a,i0,a)', 'rank ', me, ': WRONG: MPI_Allreduce with MPI_IN_PLACE'
  end if
  x = [7, 8, 9] * (me + 1)
  call MPI_Get_address(x, addr(1), ierr)
  lens(1) = 3
  call MPI_Type_create_hindexed(1, lens, addr, MPI_INTEGER, absolute, ierr)
  call MPI_Type_commit(absolute, ierr)
  if (mod(me, 2) == 0) then
    call MPI_Send(MPI_BOTTOM, 1, absolute, peer, 15, MPI_COMM_WORLD, ierr)
  else
    x = -1
    call MPI_Recv(MPI_BOTTOM, 1, absolute, peer, 15, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    if (any(x /= [7, 8, 9] * (peer + 1))) then
      failures = failures + 1
      print '(a,i0,a)', 'rank ', me, ': WRONG: MPI_BOTTOM with absolute addresses'
    end if
  end if
  call MPI_Type_free(absolute, ierr)
end subroutine
