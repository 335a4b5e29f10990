from smx_debug.cli import main

raise SystemExit(main())
