"""Pure, jit-compiled metric kernels on arrays (never imports ``jaxassoc.models``)."""
