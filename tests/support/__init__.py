"""What the tests share and are not tests themselves: ``helpers`` (running
make, a scratch copy of the project, reading a built page), ``pages`` (a page
as the template prescribes and its version records, for both lanes),
``survey_plan`` (the views the browser survey visits) and
``workflow_rehearsal`` (GitHub Actions' runner emulated, to rehearse the
workflows' jobs locally)."""
