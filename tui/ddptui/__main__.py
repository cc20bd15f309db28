from ddptui.cli import main

raise SystemExit(main())
