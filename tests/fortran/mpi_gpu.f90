! A Fortran MPI program with device buffers (cudaMalloc through ISO_C_BINDING, c_f_pointer) through
! Ferry's interposer: a derived type sent and received between GPU buffers, non-blocking calls, an
! in-place allreduce and a broadcast on device memory, and a message large enough for Ferry's IPC
! or pipelined method. Without a usable GPU every rank exits 77 (CTest: skipped). Prints
! "fortran gpu: correct" on rank 0; exits 1 on any failure.
program ferry_fortran_gpu
  use, intrinsic :: iso_c_binding
  use mpi
  implicit none
  interface
    integer(c_int) function cudaGetDeviceCount(count) bind(C, name="cudaGetDeviceCount")
      import :: c_int
      integer(c_int) :: count
    end function
    integer(c_int) function cudaSetDevice(device) bind(C, name="cudaSetDevice")
      import :: c_int
      integer(c_int), value :: device
    end function
    integer(c_int) function cudaMalloc(ptr, bytes) bind(C, name="cudaMalloc")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr) :: ptr
      integer(c_size_t), value :: bytes
    end function
    integer(c_int) function cudaFree(ptr) bind(C, name="cudaFree")
      import :: c_int, c_ptr
      type(c_ptr), value :: ptr
    end function
    integer(c_int) function cudaMemcpy(dst, src, bytes, kind) bind(C, name="cudaMemcpy")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: dst, src
      integer(c_size_t), value :: bytes
      integer(c_int), value :: kind
    end function
  end interface
  integer(c_int), parameter :: h2d = 1, d2h = 2
  integer, parameter :: nbig = 2 * 1024 * 1024       ! 8 MiB: IPC on one node, else pipelined
  integer :: ierr, me, n, peer, vec, i, total, failures, cnt, status(MPI_STATUS_SIZE), reqs(2)
  integer(c_int) :: ndev
  type(c_ptr) :: pa, pb, pbig
  integer, pointer, contiguous :: da(:), db(:), dbig(:)  ! contiguous: passed as the address, never copied
  integer, allocatable, target :: h(:), hbig(:)

  failures = 0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
  ndev = 0
  if (cudaGetDeviceCount(ndev) /= 0 .or. ndev == 0) then
    if (me == 0) print '(a)', 'no usable GPU: skipped'
    call MPI_Finalize(ierr)
    stop 77
  end if
  ierr = cudaSetDevice(int(mod(me, ndev), c_int))
  peer = ieor(me, 1)
  allocate(h(20), hbig(nbig))
  call check(cudaMalloc(pa, 80_c_size_t) == 0 .and. cudaMalloc(pb, 80_c_size_t) == 0 .and. &
             cudaMalloc(pbig, int(4 * nbig, c_size_t)) == 0, 'cudaMalloc')
  call c_f_pointer(pa, da, [20])
  call c_f_pointer(pb, db, [20])
  call c_f_pointer(pbig, dbig, [nbig])

  ! Every other integer, from GPU memory into GPU memory.
  call MPI_Type_vector(10, 1, 2, MPI_INTEGER, vec, ierr)
  call MPI_Type_commit(vec, ierr)
  h = [(100 * me + i, i = 1, 20)]
  call upload(pa, h, 20)
  h = -1
  call upload(pb, h, 20)
  if (mod(me, 2) == 0) then
    call MPI_Send(da, 1, vec, peer, 7, MPI_COMM_WORLD, ierr)
    call MPI_Recv(db, 1, vec, peer, 8, MPI_COMM_WORLD, status, ierr)
  else
    call MPI_Recv(db, 1, vec, peer, 7, MPI_COMM_WORLD, status, ierr)
    call MPI_Send(da, 1, vec, peer, 8, MPI_COMM_WORLD, ierr)
  end if
  call check(ierr == MPI_SUCCESS .and. status(MPI_SOURCE) == peer, 'device send/recv')
  call download(h, pb, 20)
  call check(all(h(1:20:2) == [(100 * peer + i, i = 1, 20, 2)]) .and. all(h(2:20:2) == -1), 'device vector data')

  h = -1
  call upload(pb, h, 20)
  call MPI_Irecv(db, 20, MPI_INTEGER, peer, 9, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(da, 20, MPI_INTEGER, peer, 9, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  call download(h, pb, 20)
  call check(all(h == [(100 * peer + i, i = 1, 20)]), 'device Isend/Irecv data')

  h = me
  call upload(pa, h, 20)
  call MPI_Allreduce(MPI_IN_PLACE, da, 20, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call download(h, pa, 20)
  call check(all(h == n * (n - 1) / 2), 'device MPI_Allreduce with MPI_IN_PLACE')
  h = -1
  if (me == 0) h = [(i, i = 1, 20)]
  call upload(pa, h, 20)
  call MPI_Bcast(da, 1, vec, 0, MPI_COMM_WORLD, ierr)
  call download(h, pa, 20)
  call check(all(h(1:20:2) == [(i, i = 1, 20, 2)]), 'device MPI_Bcast of a vector')

  if (mod(me, 2) == 0) then
    hbig = [(i + me, i = 1, nbig)]
    call upload(pbig, hbig, nbig)
    call MPI_Send(dbig, nbig, MPI_INTEGER, peer, 14, MPI_COMM_WORLD, ierr)
  else
    hbig = -1
    call upload(pbig, hbig, nbig)
    call MPI_Recv(dbig, nbig, MPI_INTEGER, peer, 14, MPI_COMM_WORLD, status, ierr)
    call MPI_Get_count(status, MPI_INTEGER, cnt, ierr)
    call download(hbig, pbig, nbig)
    call check(cnt == nbig .and. all(hbig == [(i + peer, i = 1, nbig)]), 'device large message')
  end if

  call MPI_Type_free(vec, ierr)
  ierr = cudaFree(pa)
  ierr = cudaFree(pb)
  ierr = cudaFree(pbig)
  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (me == 0 .and. total == 0) print '(a)', 'fortran gpu: correct'
  ! A main program's allocatables are never freed by themselves: LeakSanitizer would report them.
  deallocate(h, hbig)
  call MPI_Finalize(ierr)
  if (total /= 0) stop 1

contains

  subroutine upload(dst, src, count)
    type(c_ptr), intent(in) :: dst
    integer, intent(in), target :: src(:)
    integer, intent(in) :: count
    call check(cudaMemcpy(dst, c_loc(src), int(4 * count, c_size_t), h2d) == 0, 'cudaMemcpy to the device')
  end subroutine

  subroutine download(dst, src, count)
    integer, intent(inout), target :: dst(:)
    type(c_ptr), intent(in) :: src
    integer, intent(in) :: count
    call check(cudaMemcpy(c_loc(dst), src, int(4 * count, c_size_t), d2h) == 0, 'cudaMemcpy to the host')
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
