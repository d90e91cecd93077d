"""Faithful fakes of Jetson sysfs trees and of ``pynvml``, for tests and demos without hardware.

* :mod:`dvfslab.testing.fake_sysfs`: ``build_board(root, profile)`` writes a JetPack-like
  file tree (devfreq, INA3221 rails, load, thermal zones, nvpmodel) and ``FakeKernelIO``
  applies the kernel's devfreq rules to writes (injected: ``io=board.io()``, or
  ``DVFSLAB_SYSFS_IO=dvfslab.testing.fake_sysfs:FakeKernelIO``).
* :mod:`dvfslab.testing.fake_ina`: ``install(board)`` gives a ``FakeKernelIO`` whose INA3221
  reads block for a fresh conversion on a virtual clock (``io.clock``), as the real driver's do.
* :mod:`dvfslab.testing.fake_pynvml`: a module to put in ``sys.modules["pynvml"]``.
"""
