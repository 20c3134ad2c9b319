from operator_checker.cli import main

raise SystemExit(main())
