"""Halo widths, as ferry/halo.hpp defines them, in the array's axis order."""
import itertools

from ._errors import argument_error

DIRECTIONS = tuple(d for d in itertools.product((-1, 0, 1), repeat=3) if d != (0, 0, 0))


def _width(w, what):
    if isinstance(w, bool) or not isinstance(w, int) and not hasattr(w, "__index__"):
        raise argument_error("%s: a width is an int, not %r" % (what, w))
    w = int(w)
    if w < 0:
        raise argument_error("%s: negative width %d" % (what, w))
    return w


def _triple(v, what):
    if isinstance(v, (list, tuple)):
        if len(v) != 3:
            raise argument_error("%s: 3 values (one per axis), not %d" % (what, len(v)))
        return tuple(_width(x, what) for x in v)
    return (_width(v, what),) * 3


def _direction(d):
    try:
        d = tuple(int(x) for x in d)
    except TypeError:
        d = None
    if d is None or len(d) != 3 or d not in DIRECTIONS:
        raise argument_error("%r is not a neighbour direction (3 values of -1, 0, +1, not all 0)" % (d,))
    return d


class Widths:
    """How thick the halo is, per direction. Directions are the 26 neighbours d = (d0, d1, d2) in
    the array's axis order, each -1, 0 or +1. The halo region from d is a box: along an axis where d
    is 0 it spans the interior; along an axis where d is -1 (+1) it lies just before (after) the
    interior and is `thickness(d, axis)` points thick.

    The default form is a minus and a plus width per axis (GCL/GHEX): the region from d is, along
    each of its non-zero axes, as thick as that side's width, so the edge (-1, -1, 0) is
    minus[0] x minus[1] x interior and a corner is the product of three widths; a width of 0 on
    one side empties every region touching that side. `set(d, w)` overrides one direction: its
    region becomes w thick along each of its non-zero axes, and w = 0 skips it (a star stencil
    sends no edges or corners: faces_only()).

        Widths(1)                              # 1 on every side, all 26 directions
        Widths(minus=(0, 2, 2), plus=(0, 2, 2)) # no halo along axis 0
        Widths(3).faces_only()                 # a radius-3 star stencil
        Widths(1).set((0, 0, 1), 2)            # the +axis-2 face 2 thick
    """

    def __init__(self, width=0, *, minus=None, plus=None):
        self.minus = _triple(width if minus is None else minus, "minus widths")
        self.plus = _triple(width if plus is None else plus, "plus widths")
        self._set = {}

    @classmethod
    def uniform(cls, width):
        return cls(width)

    @classmethod
    def axes(cls, minus, plus):
        return cls(minus=minus, plus=plus)

    def set(self, direction, width):
        """Overrides the region from `direction`; returns self."""
        self._set[_direction(direction)] = _width(width, "width of direction %r" % (direction,))
        return self

    def faces_only(self):
        """No edges or corners (star stencils); returns self."""
        for d in DIRECTIONS:
            if sum(map(abs, d)) > 1:
                self._set[d] = 0
        return self

    def no_corners(self):
        """No corners; returns self."""
        for d in DIRECTIONS:
            if sum(map(abs, d)) == 3:
                self._set[d] = 0
        return self

    def thickness(self, direction, axis):
        """Points of the region from `direction` along `axis` (0 where direction[axis] is 0, or
        the region is empty)."""
        d = _direction(direction)
        if d[axis] == 0 or not self.sends(d):
            return 0
        if d in self._set:
            return self._set[d]
        return self.minus[axis] if d[axis] < 0 else self.plus[axis]

    def sends(self, direction):
        """Whether the region from `direction` holds any point."""
        d = _direction(direction)
        if d in self._set:
            return self._set[d] > 0
        return all((self.minus[a] if d[a] < 0 else self.plus[a]) > 0 for a in range(3) if d[a] != 0)

    def side(self, axis, sign):
        """The thickest region on one side (sign -1 or +1) of `axis`: the halo the array needs there."""
        return max([self.thickness(d, axis) for d in DIRECTIONS if d[axis] == sign] + [0])

    def overrides(self):
        """{direction: width} of the directions set() changed."""
        return dict(self._set)

    def __eq__(self, other):
        return (isinstance(other, Widths) and
                all(self.thickness(d, a) == other.thickness(d, a) for d in DIRECTIONS for a in range(3)))

    def __repr__(self):
        extra = "".join(".set(%r, %d)" % (d, w) for d, w in sorted(self._set.items()))
        return "Widths(minus=%r, plus=%r)%s" % (self.minus, self.plus, extra)


def as_widths(w):
    """A Widths from a Widths, an int (every side) or (minus, plus) per axis."""
    if isinstance(w, Widths):
        return w
    if isinstance(w, (list, tuple)) and len(w) == 2:
        return Widths(minus=w[0], plus=w[1])
    return Widths(w)
