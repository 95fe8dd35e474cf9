"""ferry.halo's exceptions: each carries the MPI error class the C API returned."""


def _mpi():
    from mpi4py import MPI
    return MPI


def error_name(error_class):
    """"MPI_ERR_ARG" for the MPI's value of MPI_ERR_ARG, and so on (mpi4py's constants are the MPI
    library's own, as are the C API's return values)."""
    MPI = _mpi()
    for name in dir(MPI):
        if name.startswith("ERR_") and name != "ERR_LASTCODE" and getattr(MPI, name) == error_class:
            return "MPI_" + name
    return "MPI error class %d" % error_class


class HaloError(RuntimeError):
    """A call of the halo library failed. `error_class` is the MPI error class (an int, compare it
    with mpi4py's MPI.ERR_ARG...), `error_name` its name, `message` what went wrong."""

    def __init__(self, message, error_class):
        self.message = message
        self.error_class = error_class
        self.error_name = error_name(error_class)
        super().__init__("[%s] %s" % (self.error_name, message))


class HaloArgumentError(HaloError, ValueError):
    """Bad input (MPI_ERR_ARG and its kin): a description of a domain, field or option that cannot
    be right. Raised on every rank together, so a mistake on one rank never leaves others waiting."""


def _argument_classes():
    MPI = _mpi()
    return {MPI.ERR_ARG, MPI.ERR_COMM, MPI.ERR_BUFFER, MPI.ERR_COUNT, MPI.ERR_TYPE, MPI.ERR_DIMS}


def make_error(message, error_class):
    cls = HaloArgumentError if error_class in _argument_classes() else HaloError
    return cls(message, error_class)


def argument_error(message):
    return HaloArgumentError(message, _mpi().ERR_ARG)
