"""badref: deliberately wrong kernels, to check that the conformance kit catches each kind of
bug (wrong math, ignored strides, unsafe aliasing, wrong distribution, ignored seed) and that
its xfail file handling is strict. Also a backend ``emptyref`` with no kernels at all."""
